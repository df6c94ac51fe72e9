"""The ``next`` object reaches the model in every shape toolspan renders a result in."""

from __future__ import annotations

import random
from typing import Any

import orjson

from toolspan.tracer import Executor, Safeguards, Tool, ToolCall
from toolspan.tracer.integrations import model_reply
from toolspan.tracer.integrations.anthropic import tool_result_block
from toolspan.tracer.integrations.openai import function_call_output, tool_message
from toolspan.tracer.store import MemoryStore
from toolspan.tracer.testing import FakeClock


def _lost_write() -> Any:
    def send_sms(to: str) -> None:
        raise TimeoutError("gateway did not answer")

    clock = FakeClock()
    executor = Executor(
        [
            Tool("send_sms", send_sms, side_effect="write", check_with="get_sms_status"),
            Tool("get_sms_status", lambda to: {"sent": False}),
        ],
        safeguards=Safeguards(store=MemoryStore()),
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
    )
    return executor.execute(ToolCall("send_sms", "c1", {"to": "+47"}, conversation_id="conv"))


def test_every_shape_carries_next() -> None:
    result = _lost_write()
    expected = {"instruction": result.next.instruction, "tools": ["get_sms_status"]}
    texts = [
        result.to_openai_message()["content"],
        result.to_anthropic_block()["content"],
        tool_message(result)["content"],  # OpenAI Chat adapter
        function_call_output(result)["output"],  # OpenAI Responses adapter
        tool_result_block(result)["content"],  # Anthropic adapter
        model_reply(result).text,  # MCP and the framework adapters
    ]
    for text in texts:
        assert orjson.loads(text)["next"] == expected
    assert tool_result_block(result)["is_error"] is True
