"""Runs, deliveries and keys: the same inputs give the same key whichever way a
call was built; ``executor.run`` gives one trace per request; a redelivered
request is neither punished by the guards nor allowed to run a write twice."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest
from opentelemetry.trace import StatusCode

from toolspan.tracer import AsyncExecutor, Tool, ToolCall, ToolError
from toolspan.tracer.integrations import anthropic as ts_anthropic
from toolspan.tracer.store import MemoryStore

from .conftest import Scripted
from .test_safeguards import build

MESSAGE = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "refund_order", "input": {"order_id": "A1"}},
    ],
}


def _executor(spans, tools, store=None, **guard_options):
    return build(spans, tools, MemoryStore() if store is None else store, **guard_options)


def _refund(fake):
    return Tool(
        "refund_order",
        fake,
        side_effect="write",
        idempotent=True,
        key_passed="scripted",
        keys_honoured=True,
        resource_key=lambda arguments: arguments["order_id"],
    )


def _keys(spans):
    return [spans.attrs(span).get("toolspan.idempotency.key") for span in spans.calls()]


def test_tool_calls_then_execute_gives_the_key_answer_derives(spans):
    fake = Scripted({"refunded": True})
    executor = _executor(spans, [_refund(fake)])
    ts_anthropic.answer(executor, MESSAGE, conversation_id="c", request_id="req-1")
    (bare,) = ts_anthropic.tool_calls(MESSAGE, conversation_id="c", request_id="req-1")
    assert bare.idempotency_key is None  # built without declarations
    again = executor.execute(bare)
    by_answer, by_tool_calls = _keys(spans)
    assert by_answer is not None and by_answer == by_tool_calls
    # The same key, so the second is a replay: the refund ran once.
    assert (again.replayed, len(fake.calls)) == (True, 1)


def test_the_derived_key_retries_a_timed_out_write_once_more(spans):
    fake = Scripted(ToolError("timeout"), {"refunded": True})
    executor = _executor(spans, [_refund(fake)])
    call = ToolCall("refund_order", "c1", {"order_id": "A1"}, conversation_id="c", request_id="r")
    result = executor.execute(call)
    assert (result.status, result.attempts, len(fake.calls)) == ("succeeded", 2, 2)
    assert _keys(spans)[0] is not None


def test_an_idempotent_write_with_no_request_id_warns_once_and_runs_unkeyed(spans, caplog):
    fake = Scripted(ToolError("timeout"))
    tool = dataclasses.replace(_refund(fake), name="refund_without_request")
    executor = _executor(spans, [tool])
    calls = [
        ToolCall("refund_without_request", f"c{i}", {"order_id": f"A{i}"}, conversation_id="c")
        for i in range(2)
    ]
    with caplog.at_level(logging.WARNING, logger="toolspan.tracer"):
        results = [executor.execute(call) for call in calls]
    assert [r.error_code for r in results] == ["unknown_outcome", "unknown_outcome"]
    assert _keys(spans) == [None, None]
    warned = [r.getMessage() for r in caplog.records if "request_id" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("refund_without_request ")


def test_a_run_is_one_trace_whose_calls_take_its_ids(spans):
    executor = _executor(spans, [Tool("get_order", Scripted({"status": "shipped"}))])
    with executor.run("refund-agent", request_id="req-9", conversation_id="conv-9") as run:
        for i in range(3):
            executor.execute(ToolCall("get_order", f"c{i}", {"order_id": f"A{i}"}, ""))
    (root,) = [s for s in spans.all() if s.name == "invoke_agent refund-agent"]
    assert spans.attrs(root) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "refund-agent",
        "toolspan.delivery.id": run.delivery_id,
        "toolspan.request.id": "req-9",
        "gen_ai.conversation.id": "conv-9",
    }
    calls = spans.calls()
    assert {s.context.trace_id for s in calls} == {root.context.trace_id}
    assert {s.parent.span_id for s in calls} == {root.context.span_id}
    assert {
        (spans.attrs(s)["toolspan.request.id"], spans.attrs(s)["gen_ai.conversation.id"])
        for s in calls
    } == {("req-9", "conv-9")}


def test_a_call_keeps_its_own_ids_inside_a_run(spans):
    executor = _executor(spans, [Tool("get_order", Scripted({"status": "shipped"}))])
    with executor.run("agent", request_id="req-run", conversation_id="conv-run"):
        executor.execute(ToolCall("get_order", "c1", {}, "conv-own", request_id="req-own"))
    attrs = spans.attrs(spans.call())
    assert (attrs["toolspan.request.id"], attrs["gen_ai.conversation.id"]) == (
        "req-own",
        "conv-own",
    )


def test_an_exception_leaving_a_run_marks_its_span(spans):
    executor = _executor(spans, [])
    with pytest.raises(RuntimeError), executor.run("agent", request_id="r"):
        raise RuntimeError("the model client broke")
    (root,) = spans.all()
    assert root.status.status_code is StatusCode.ERROR
    assert [event.name for event in root.events] == ["exception"]


def test_the_async_executor_runs_too(spans):
    executor = AsyncExecutor(
        [Tool("get_order", Scripted({"ok": 1}))], tracer_provider=spans.provider
    )

    async def agent() -> None:
        with executor.run("agent", request_id="r", conversation_id="c"):
            await executor.execute(ToolCall("get_order", "c1", {}, ""))

    asyncio.run(agent())
    (root,) = [s for s in spans.all() if s.name == "invoke_agent agent"]
    assert spans.call().parent.span_id == root.context.span_id


def _deliver(executor, get_order_times=1):
    """One handling of request req-1: look the order up, refund it."""
    results = [
        executor.execute(
            ToolCall("get_order", f"g{i}", {"order_id": "A1"}, "conv", request_id="req-1")
        )
        for i in range(get_order_times)
    ]
    refund = ToolCall("refund_order", "r", {"order_id": "A1"}, "conv", request_id="req-1")
    return [*results, executor.execute(refund)]


@pytest.mark.parametrize("per", ["run", "executor"])
def test_redeliveries_block_nothing_and_refund_once(spans, store, per):
    orders = Scripted({"order_id": "A1", "status": "delivered"})
    refunds = Scripted({"refund_id": "rf_1"})
    tools = [Tool("get_order", orders), _refund(refunds)]
    shared = _executor(spans, tools, store, loop_threshold=3)
    statuses = []
    for delivery in range(5):  # a queue handing the same request over five times
        if per == "run":
            with shared.run("refund-agent", request_id="req-1"):
                results = _deliver(shared)
        else:  # a new worker process each time, on the shared store
            results = _deliver(_executor(spans, tools, store, loop_threshold=3))
        statuses.append([(r.status, r.replayed) for r in results])
    assert (
        statuses
        == [[("succeeded", False), ("succeeded", False)]]
        + [[("succeeded", False), ("succeeded", True)]] * 4
    )
    assert (len(orders.calls), len(refunds.calls)) == (5, 1)


def test_a_loop_within_one_delivery_is_still_blocked(spans, store):
    tools = [Tool("get_order", Scripted({"status": "delivered"})), _refund(Scripted({"r": 1}))]
    executor = _executor(spans, tools, store, loop_threshold=3)
    with executor.run("refund-agent", request_id="req-1"):
        results = _deliver(executor, get_order_times=4)
    assert [r.status for r in results] == ["succeeded"] * 3 + ["loop_blocked", "succeeded"]


def test_a_redelivery_gets_a_turn_budget_of_its_own(spans, store):
    # Each delivery's lookup fails twice, then answers: 3 attempts of a budget of 5.
    answers = [ToolError.from_status(503), ToolError.from_status(503), {"status": "delivered"}]
    orders = Scripted(*answers * 2)
    executor = _executor(spans, [Tool("get_order", orders)], store, max_attempts_per_action=5)
    lookup = ToolCall("get_order", "g", {"order_id": "A1"}, "conv", request_id="req-1")
    results = []
    for _ in range(2):
        with executor.run("refund-agent", request_id="req-1"):
            results.append(executor.execute(lookup))
    assert [(r.status, r.attempts) for r in results] == [("succeeded", 3), ("succeeded", 3)]
