"""The OpenAI Agents SDK adapter, driven by the SDK's own Runner and its scripted Model."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, RunResult, WebSearchTool, function_tool
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

from examples.frameworks import support_declarations
from examples.support_desk import Fault, SupportDesk
from toolspan.tracer import Safeguards
from toolspan.tracer.integrations import Declaration
from toolspan.tracer.integrations.openai_agents import guard_agent, guard_tools
from toolspan.tracer.store import MemoryStore, derive_key

REFUND = {"order_id": "A-1001", "amount_cents": 4900, "reason": "broken"}
EMAIL = {"to": "rider@example.com", "subject": "Refund", "body": "On its way."}


def desk_tools(desk: SupportDesk) -> list[FunctionTool]:
    return [
        function_tool(desk.get_order, name_override="get_order", description_override="Look up."),
        function_tool(desk.refund_order, name_override="refund_order"),
        function_tool(desk.send_email, name_override="send_email"),
        function_tool(desk.cancel_order, name_override="cancel_order"),
    ]


def run(
    steps: list[list[tuple[str, dict[str, Any]]]],
    spans,
    clock,
    *,
    faults: dict[tuple[str, int], Fault] | None = None,
    guarded: bool = True,
) -> tuple[RunResult, SupportDesk]:
    """One run of a real Runner loop: each step is one model turn of calls."""
    desk = SupportDesk(faults=faults or {})
    ids = iter(range(1, 100))
    model = ScriptedModel(
        [
            *(
                [function_call(name, args, call_id=f"c{next(ids)}") for name, args in step]
                for step in steps
            ),
            [assistant_message("done")],
        ]
    )
    agent = Agent(name="desk", model=model, tools=desk_tools(desk))
    if guarded:
        agent = guard_agent(
            agent,
            support_declarations(desk),
            safeguards=Safeguards(store=MemoryStore()),
            tracer_provider=spans.provider,
            sleep=clock.async_sleep,
            clock=clock,
            rng=random.Random(0),
        )
    config = RunConfig(
        tracing_disabled=True, group_id="conv-1", trace_metadata={"request_id": "req-1"}
    )
    return asyncio.run(Runner.run(agent, "help", run_config=config)), desk


def outputs(result: RunResult) -> dict[str, Any]:
    """What the model was shown for each call id."""
    return {
        item.raw_item["call_id"]: item.output
        for item in result.new_items
        if isinstance(item, ToolCallOutputItem)
    }


def test_a_read_that_fails_once_is_retried_and_the_model_sees_its_data(spans, clock):
    result, desk = run(
        [[("get_order", {"order_id": "A-1001"})]], spans, clock, faults={("get_order", 1): 503}
    )
    assert outputs(result)["c1"] == {"order_id": "A-1001", **desk.orders["A-1001"]}
    assert result.final_output == "done"
    assert desk.calls["get_order"] == 2 and len(clock.slept) == 1
    call = spans.attrs(spans.call())
    assert (call["gen_ai.tool.name"], call["gen_ai.tool.call.id"]) == ("get_order", "c1")
    assert (call["gen_ai.conversation.id"], call["toolspan.request.id"]) == ("conv-1", "req-1")
    assert (call["toolspan.status"], call["toolspan.attempts"]) == ("succeeded", 2)
    assert [spans.attrs(a)["toolspan.attempt.outcome"] for a in spans.attempts()] == [
        "http_503",
        "ok",
    ]


def test_a_keyed_write_whose_response_is_lost_happens_once(spans, clock):
    result, desk = run(
        [[("refund_order", REFUND)]],
        spans,
        clock,
        faults={("refund_order", 1): "commit_then_timeout"},
    )
    assert outputs(result)["c1"] == {"refund_id": "rf_A-1001_4900", "amount_cents": 4900}
    assert desk.side_effects["refund:A-1001"] == 1 and desk.calls["refund_order"] == 2
    call = spans.attrs(spans.call())
    assert call["toolspan.idempotency.key"] == derive_key("req-1", "refund_order:A-1001")
    assert (call["toolspan.side_effect"], call["toolspan.attempts"]) == ("write", 2)


def test_an_unkeyed_write_that_times_out_is_not_repeated_and_the_run_goes_on(spans, clock):
    result, desk = run(
        [[("send_email", EMAIL)]], spans, clock, faults={("send_email", 1): "commit_then_timeout"}
    )
    shown = json.loads(outputs(result)["c1"])  # the SDK's native error result: a string
    assert (shown["ok"], shown["status"], shown["error_code"]) == (
        False,
        "unsafe_retry",
        "unknown_outcome",
    )
    assert result.final_output == "done"
    assert (
        desk.calls["send_email"] == 1 and desk.side_effects["email:rider@example.com:Refund"] == 1
    )
    assert spans.attrs(spans.call())["toolspan.status"] == "unsafe_retry"


def test_a_lost_cancel_is_settled_by_its_read_back(spans, clock):
    result, desk = run(
        [[("cancel_order", {"order_id": "A-1002"})]],
        spans,
        clock,
        faults={("cancel_order", 1): "commit_then_timeout"},
    )
    assert outputs(result)["c1"] == {"order_id": "A-1002", "cancelled": True}
    assert desk.side_effects["cancel:A-1002"] == 1 and desk.calls["cancel_order"] == 1
    assert spans.attrs(spans.call())["toolspan.reconciled"] is True


def test_a_replanned_write_is_replayed_from_the_store(spans, clock):
    result, desk = run([[("refund_order", REFUND)], [("refund_order", REFUND)]], spans, clock)
    shown = outputs(result)
    assert shown["c1"] == shown["c2"] == {"refund_id": "rf_A-1001_4900", "amount_cents": 4900}
    assert desk.calls["refund_order"] == 1
    assert [spans.attrs(c).get("toolspan.idempotency.replayed", False) for c in spans.calls()] == [
        False,
        True,
    ]


def test_the_schema_comes_from_the_function_tool(spans, clock):
    result, desk = run([[("get_order", {"order_id": 7})]], spans, clock)
    shown = json.loads(outputs(result)["c1"])
    assert shown["status"] == "invalid_arguments" and "order_id" in shown["message"]
    assert desk.calls["get_order"] == 0


def test_without_the_boundary_the_model_gets_a_bare_error_and_no_spans(spans, clock):
    result, _ = run(
        [[("send_email", EMAIL)]],
        spans,
        clock,
        faults={("send_email", 1): "commit_then_timeout"},
        guarded=False,
    )
    assert "unsafe_retry" not in outputs(result)["c1"]  # the SDK's generic message
    assert spans.all() == []


def test_the_sdks_per_attempt_timeout_is_a_retryable_timeout(spans, clock):
    answered = []

    async def slow_then_fast(sku: str) -> str:
        answered.append(sku)
        if len(answered) == 1:
            await asyncio.Event().wait()  # never answers: the SDK's timeout ends it
        return "in stock"

    stock = function_tool(slow_then_fast, name_override="check_stock", timeout=0.01)
    model = ScriptedModel(
        [[function_call("check_stock", {"sku": "B"}, call_id="c1")], [assistant_message("done")]]
    )
    agent = guard_agent(
        Agent(name="desk", model=model, tools=[stock]),
        {"check_stock": Declaration.read()},
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
    )
    result = asyncio.run(
        Runner.run(agent, "?", run_config=RunConfig(tracing_disabled=True, group_id="g"))
    )
    assert outputs(result)["c1"] == "in stock" and len(answered) == 2
    assert [spans.attrs(a)["toolspan.attempt.outcome"] for a in spans.attempts()] == [
        "timeout",
        "ok",
    ]


def test_a_bug_in_a_tool_is_recorded_and_answered_by_the_sdks_own_policy(spans, clock):
    def broken(order_id: str) -> str:
        raise KeyError(order_id)

    model = ScriptedModel(
        [[function_call("broken", {"order_id": "A"}, call_id="c1")], [assistant_message("done")]]
    )
    agent = guard_agent(
        Agent(name="desk", model=model, tools=[function_tool(broken)]),
        {},
        tracer_provider=spans.provider,
    )
    result = asyncio.run(
        Runner.run(agent, "?", run_config=RunConfig(tracing_disabled=True, group_id="g"))
    )
    assert outputs(result)["c1"].startswith("An error occurred while running the tool")
    assert spans.attrs(spans.call())["error.type"] == "KeyError"


def test_only_function_tools_are_wrapped():
    desk = SupportDesk()
    hosted = WebSearchTool()
    guarded = guard_tools([*desk_tools(desk), hosted], {})
    assert guarded[-1] is hosted
    assert all(isinstance(t, FunctionTool) for t in guarded[:-1])
    originals = desk_tools(desk)
    for before, after in zip(originals, guarded[:-1], strict=True):
        assert (after.name, after.params_json_schema, after.description) == (
            before.name,
            before.params_json_schema,
            before.description,
        )
        assert after.on_invoke_tool is not before.on_invoke_tool


@pytest.mark.parametrize("group_id", [None, "g-7"])
def test_the_conversation_is_the_runs_group_id_unless_the_application_says(spans, clock, group_id):
    desk = SupportDesk()
    model = ScriptedModel(
        [
            [function_call("get_order", {"order_id": "A-1001"}, call_id="c1")],
            [assistant_message("ok")],
        ]
    )
    chosen = {"conversation_id": lambda ctx: "from-app"} if group_id is None else {}
    agent = guard_agent(
        Agent(name="desk", model=model, tools=desk_tools(desk)),
        support_declarations(desk),
        tracer_provider=spans.provider,
        **chosen,
    )
    asyncio.run(
        Runner.run(agent, "?", run_config=RunConfig(tracing_disabled=True, group_id=group_id))
    )
    call = spans.attrs(spans.call())
    assert call["gen_ai.conversation.id"] == (group_id or "from-app")
    assert "toolspan.request.id" not in call  # no request id: no keys


def test_an_agent_used_as_a_tool_is_left_to_its_own_tools():
    desk = SupportDesk()
    helper = Agent(name="helper", tools=desk_tools(desk)).as_tool(
        tool_name="ask_helper", tool_description="Ask the helper."
    )
    (kept,) = guard_tools([helper], {})
    assert kept is helper
