"""The Pydantic AI adapter, driven by a real Agent loop and Pydantic AI's FunctionModel."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest
from pydantic_ai import Agent, Tool
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from examples.frameworks import support_declarations
from examples.support_desk import Fault, SupportDesk
from toolspan.tracer import Safeguards
from toolspan.tracer.integrations import Declaration
from toolspan.tracer.integrations.pydantic_ai import GuardedToolset, RetryBoundary, guard_toolset
from toolspan.tracer.store import MemoryStore, derive_key

REFUND = {"order_id": "A-1001", "amount_cents": 4900, "reason": "broken"}
EMAIL = {"to": "rider@example.com", "subject": "Refund", "body": "On its way."}


def scripted(steps: list[list[tuple[str, dict[str, Any]]]]) -> FunctionModel:
    """Makes one step's calls per model request, then answers "done"."""
    ids = iter(range(1, 100))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(steps):
            return ModelResponse(
                parts=[ToolCallPart(n, a, tool_call_id=f"c{next(ids)}") for n, a in steps[turn]]
            )
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def desk_tools(desk: SupportDesk) -> list[Tool[None]]:
    return [
        Tool(desk.get_order, takes_ctx=False, description="Look up an order."),
        Tool(desk.refund_order, takes_ctx=False),
        Tool(desk.send_email, takes_ctx=False),
        Tool(desk.cancel_order, takes_ctx=False),
    ]


def run(steps, spans, clock, *, faults: dict[tuple[str, int], Fault] | None = None, guarded=True):
    desk = SupportDesk(faults=faults or {})
    boundary = RetryBoundary(
        support_declarations(desk),
        safeguards=Safeguards(store=MemoryStore()),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
        rng=random.Random(0),
    )
    agent = Agent(
        scripted(steps), tools=desk_tools(desk), capabilities=[boundary] if guarded else []
    )
    result = agent.run_sync("help", conversation_id="conv-1", run_id="req-1")
    return result, desk


def returns(result) -> dict[str, ToolReturnPart]:
    """The tool results the model was sent, by call id."""
    return {
        part.tool_call_id: part
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def test_a_read_that_fails_once_is_retried_and_the_model_sees_its_data(spans, clock):
    result, desk = run(
        [[("get_order", {"order_id": "A-1001"})]], spans, clock, faults={("get_order", 1): 503}
    )
    part = returns(result)["c1"]
    assert (part.outcome, part.content) == (
        "success",
        {"order_id": "A-1001", **desk.orders["A-1001"]},
    )
    assert result.output == "done" and desk.calls["get_order"] == 2 and len(clock.slept) == 1
    call = spans.attrs(spans.call())
    assert (call["gen_ai.tool.call.id"], call["gen_ai.conversation.id"]) == ("c1", "conv-1")
    assert (call["toolspan.request.id"], call["toolspan.turn.id"]) == ("req-1", "req-1-step1")
    assert (call["toolspan.status"], call["toolspan.attempts"]) == ("succeeded", 2)


def test_a_keyed_write_whose_response_is_lost_happens_once(spans, clock):
    result, desk = run(
        [[("refund_order", REFUND)]],
        spans,
        clock,
        faults={("refund_order", 1): "commit_then_timeout"},
    )
    assert returns(result)["c1"].content == {"refund_id": "rf_A-1001_4900", "amount_cents": 4900}
    assert desk.side_effects["refund:A-1001"] == 1 and desk.calls["refund_order"] == 2
    call = spans.attrs(spans.call())
    assert call["toolspan.idempotency.key"] == derive_key("req-1", "refund_order:A-1001")


def test_an_unkeyed_write_that_times_out_fails_natively_and_is_not_repeated(spans, clock):
    result, desk = run(
        [[("send_email", EMAIL)]], spans, clock, faults={("send_email", 1): "commit_then_timeout"}
    )
    part = returns(result)["c1"]
    assert part.outcome == "failed"  # Pydantic AI's native failed tool result
    shown = json.loads(part.content)
    assert (shown["status"], shown["error_code"], shown["retryable"]) == (
        "unsafe_retry",
        "unknown_outcome",
        False,
    )
    assert result.output == "done" and desk.calls["send_email"] == 1


def test_without_the_boundary_the_timeout_ends_the_run(spans, clock):
    with pytest.raises(TimeoutError):
        run(
            [[("send_email", EMAIL)]],
            spans,
            clock,
            faults={("send_email", 1): "commit_then_timeout"},
            guarded=False,
        )
    assert spans.all() == []


def test_a_lost_cancel_is_settled_by_its_read_back_and_a_replan_is_replayed(spans, clock):
    result, desk = run(
        [
            [("cancel_order", {"order_id": "A-1002"})],
            [("refund_order", REFUND)],
            [("refund_order", REFUND)],
        ],
        spans,
        clock,
        faults={("cancel_order", 1): "commit_then_timeout"},
    )
    shown = returns(result)
    assert shown["c1"].content == {"order_id": "A-1002", "cancelled": True}
    assert shown["c2"].content == shown["c3"].content
    assert desk.calls["cancel_order"] == 1 and desk.calls["refund_order"] == 1
    cancel, first, replan = spans.calls()
    assert spans.attrs(cancel)["toolspan.reconciled"] is True
    assert spans.attrs(first).get("toolspan.idempotency.replayed", False) is False
    assert spans.attrs(replan)["toolspan.idempotency.replayed"] is True
    assert spans.attrs(replan)["toolspan.turn.id"] == "req-1-step3"


def test_name_schema_and_description_come_from_the_tool_definition(spans, clock):
    seen: dict[str, Any] = {}
    desk = SupportDesk()
    script = scripted([[("get_order", {"order_id": "A-1001"}), ("send_email", EMAIL)]])

    def record(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t for t in info.function_tools})
        return script.function(messages, info)

    toolset = guard_toolset(FunctionToolset(desk_tools(desk)), support_declarations(desk))
    Agent(FunctionModel(record), toolsets=[toolset]).run_sync("?")
    built = {
        name: executor.tools[name] for name, (_, _, executor) in toolset.bridge._executors.items()
    }
    assert sorted(built) == ["get_order", "send_email"]  # built on first use
    for name, declared in built.items():
        assert declared.parameters == seen[name].parameters_json_schema
        assert declared.description == (seen[name].description or "")
    assert built["get_order"].description == "Look up an order."
    # Declared a read; send_email is undeclared: a write.
    assert (built["get_order"].side_effect, built["send_email"].side_effect) == ("none", "write")


def test_the_toolset_wrapper_works_without_the_capability(spans, clock):
    desk = SupportDesk(faults={("get_order", 1): 503})
    toolset = guard_toolset(
        FunctionToolset(desk_tools(desk)),
        support_declarations(desk),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
    )
    assert isinstance(toolset, GuardedToolset)
    agent = Agent(scripted([[("get_order", {"order_id": "A-1001"})]]), toolsets=[toolset])
    result = asyncio.run(agent.run("?", conversation_id="conv-2"))
    assert returns(result)["c1"].outcome == "success"
    assert spans.attrs(spans.call())["toolspan.attempts"] == 2


def test_a_tools_model_retry_passes_through_and_leaves_its_key_free(spans, clock):
    attempts: list[str] = []

    def charge(order_id: str) -> dict[str, str]:
        attempts.append(order_id)
        if len(attempts) == 1:
            raise ModelRetry("confirm the order first")
        return {"charged": order_id}

    boundary = RetryBoundary(
        {"charge": Declaration.write(idempotent=True, key_passed="scripted")},
        safeguards=Safeguards(store=MemoryStore()),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
    )
    steps = [[("charge", {"order_id": "A-1"})], [("charge", {"order_id": "A-1"})]]
    agent = Agent(scripted(steps), tools=[Tool(charge, takes_ctx=False)], capabilities=[boundary])
    result = agent.run_sync("?", run_id="req-1")
    shown = returns(result)
    # Pydantic AI's own retry prompt, then the call that went through.
    assert (shown["c1"].outcome, shown["c1"].content) == ("retried", "confirm the order first")
    assert shown["c2"].content == {"charged": "A-1"}
    assert attempts == ["A-1", "A-1"]  # the same key ran again: it was not left unknown
    first, second = (spans.attrs(c) for c in spans.calls())
    assert (first["toolspan.status"], first["toolspan.error_code"]) == (
        "permanent_error",
        "control_flow",
    )
    assert first["toolspan.idempotency.key"] == second["toolspan.idempotency.key"]
    assert second["toolspan.status"] == "succeeded"
