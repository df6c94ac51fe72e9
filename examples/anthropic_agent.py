"""The example agent on the real Anthropic SDK (Messages API).

    python -m examples.anthropic_agent [--out out/anthropic_agent.jsonl]

``tool_use`` blocks go through the boundary; the results go back as
``tool_result`` blocks, ``is_error`` set on failures. Only the model is
scripted (``httpx2.MockTransport``); the ``anthropic`` client runs for real.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

from toolspan.tracer.integrations import anthropic as ts_anthropic

from .loop import MODEL, agent_span, chat_span, numbered
from .runner import Wiring, main
from .scripted_api import ScriptedAPI
from .support_desk import support_tools


def run(wiring: Wiring) -> list[Any]:
    """The agent loop: ask the model, run its tool_use blocks through the boundary, answer."""
    executor = wiring.executor(support_tools(wiring.desk))
    specs = [ts_anthropic.tool_spec(tool) for tool in executor.tools.values()]
    client = ScriptedAPI("anthropic", wiring.requests).anthropic_client()
    messages: list[Any] = []
    for request_id, request in numbered(wiring.conversation_id, wiring.requests):
        messages.append({"role": "user", "content": request.user})
        with agent_span(wiring.tracer, wiring.conversation_id, request_id):
            for turn in itertools.count(1):
                with chat_span(wiring.tracer, wiring.conversation_id):
                    message = client.messages.create(
                        model=MODEL, max_tokens=1024, messages=messages, tools=specs
                    )
                messages.append({"role": "assistant", "content": message.content})
                if message.stop_reason != "tool_use":
                    break
                messages.append(
                    ts_anthropic.answer(
                        executor,
                        message,
                        conversation_id=wiring.conversation_id,
                        request_id=request_id,
                        turn_id=f"{request_id}-turn{turn}",
                    )
                )
    return messages


if __name__ == "__main__":
    sys.exit(main("anthropic", sys.argv[1:]))
