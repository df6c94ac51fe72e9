"""The LangChain / LangGraph adapter: create_agent, a hand-built graph, fake chat models."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain.agents.middleware import ToolRetryMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command, interrupt

from examples.frameworks import support_declarations
from examples.langchain_agent import ScriptedChatModel
from examples.support_desk import Fault, SupportDesk
from tests.tracer.conftest import Spans
from toolspan.tracer import Safeguards
from toolspan.tracer.integrations import Declaration
from toolspan.tracer.integrations.langchain import RetryBoundaryMiddleware, guarded_tool_node
from toolspan.tracer.store import MemoryStore, derive_key
from toolspan.tracer.testing import FakeClock

REFUND = {"order_id": "A-1001", "amount_cents": 4900, "reason": "broken"}
EMAIL = {"to": "rider@example.com", "subject": "Refund", "body": "On its way."}
CONFIG = {"configurable": {"thread_id": "conv-1", "request_id": "req-1"}}


def scripted(steps: list[list[tuple[str, dict[str, Any]]]]) -> ScriptedChatModel:
    ids = iter(range(1, 100))
    turns = [
        AIMessage("", tool_calls=[{"name": n, "args": a, "id": f"c{next(ids)}"} for n, a in step])
        for step in steps
    ]
    return ScriptedChatModel(responses=[*turns, AIMessage("done")])


def desk_tools(desk: SupportDesk) -> list[StructuredTool]:
    return [
        StructuredTool.from_function(desk.get_order, name="get_order", description="Look up."),
        StructuredTool.from_function(desk.refund_order, name="refund_order", description="Refund."),
        StructuredTool.from_function(desk.send_email, name="send_email", description="E-mail."),
        StructuredTool.from_function(desk.cancel_order, name="cancel_order", description="Cancel."),
    ]


def boundary(desk: SupportDesk, spans, clock) -> RetryBoundaryMiddleware:
    return RetryBoundaryMiddleware(
        support_declarations(desk),
        safeguards=Safeguards(store=MemoryStore()),
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        async_sleep=clock.async_sleep,
        clock=clock,
        rng=random.Random(0),
    )


def run(
    steps, spans, clock, *, faults: dict[tuple[str, int], Fault] | None = None, middleware=None
):
    desk = SupportDesk(faults=faults or {})
    chosen = [boundary(desk, spans, clock)] if middleware is None else middleware
    agent = create_agent(scripted(steps), tools=desk_tools(desk), middleware=chosen)
    return agent.invoke({"messages": [("user", "help")]}, CONFIG), desk


def tool_messages(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


def test_a_read_that_fails_once_is_retried_and_the_model_sees_its_data(spans, clock):
    state, desk = run(
        [[("get_order", {"order_id": "A-1001"})]], spans, clock, faults={("get_order", 1): 503}
    )
    message = tool_messages(state)["c1"]
    assert message.status == "success"
    assert json.loads(message.content) == {"order_id": "A-1001", **desk.orders["A-1001"]}
    assert state["messages"][-1].content == "done"
    assert desk.calls["get_order"] == 2 and len(clock.slept) == 1
    call = spans.attrs(spans.call())
    assert (call["gen_ai.tool.call.id"], call["gen_ai.conversation.id"]) == ("c1", "conv-1")
    assert (call["toolspan.request.id"], call["toolspan.turn.id"]) == ("req-1", "req-1-turn1")
    assert (call["toolspan.status"], call["toolspan.attempts"]) == ("succeeded", 2)


def test_an_unkeyed_write_that_times_out_is_an_error_tool_message_and_is_not_repeated(spans, clock):
    state, desk = run(
        [[("send_email", EMAIL)]], spans, clock, faults={("send_email", 1): "commit_then_timeout"}
    )
    message = tool_messages(state)["c1"]
    assert message.status == "error"
    shown = json.loads(message.content)
    assert (shown["status"], shown["error_code"]) == ("unsafe_retry", "unknown_outcome")
    assert message.artifact == shown  # the structured result, for code that reads it
    assert desk.calls["send_email"] == 1 and state["messages"][-1].content == "done"


def test_langchains_own_retry_middleware_sends_that_e_mail_twice(spans, clock):
    state, desk = run(
        [[("send_email", EMAIL)]],
        spans,
        clock,
        faults={("send_email", 1): "commit_then_timeout"},
        middleware=[ToolRetryMiddleware(max_retries=1, initial_delay=0.0, jitter=False)],
    )
    assert tool_messages(state)["c1"].status == "success"  # ...after a blind repeat
    assert desk.side_effects["email:rider@example.com:Refund"] == 2
    assert spans.all() == []


def test_a_keyed_write_whose_response_is_lost_happens_once_async(spans, clock):
    desk = SupportDesk(faults={("refund_order", 1): "commit_then_timeout"})
    agent = create_agent(
        scripted([[("refund_order", REFUND)], [("refund_order", REFUND)]]),
        tools=desk_tools(desk),
        middleware=[boundary(desk, spans, clock)],
    )
    state = asyncio.run(agent.ainvoke({"messages": [("user", "refund")]}, CONFIG))
    first, replan = tool_messages(state)["c1"], tool_messages(state)["c2"]
    assert (
        json.loads(first.content)
        == json.loads(replan.content)
        == {
            "refund_id": "rf_A-1001_4900",
            "amount_cents": 4900,
        }
    )
    assert desk.side_effects["refund:A-1001"] == 1 and desk.calls["refund_order"] == 2
    calls = [spans.attrs(c) for c in spans.calls()]
    assert {c["toolspan.idempotency.key"] for c in calls} == {
        derive_key("req-1", "refund_order:A-1001")
    }
    assert [c["toolspan.attempts"] for c in calls] == [2, 0]
    assert calls[1]["toolspan.idempotency.replayed"] is True


def test_a_lost_cancel_is_settled_by_its_read_back(spans, clock):
    state, desk = run(
        [[("cancel_order", {"order_id": "A-1002"})]],
        spans,
        clock,
        faults={("cancel_order", 1): "commit_then_timeout"},
    )
    assert json.loads(tool_messages(state)["c1"].content) == {
        "order_id": "A-1002",
        "cancelled": True,
    }
    assert desk.side_effects["cancel:A-1002"] == 1 and desk.calls["cancel_order"] == 1


def test_arguments_are_checked_against_the_tools_own_schema(spans, clock):
    state, desk = run([[("get_order", {"order": "A-1001"})]], spans, clock)
    message = tool_messages(state)["c1"]
    assert message.status == "error"
    assert json.loads(message.content)["status"] == "invalid_arguments"
    assert desk.calls["get_order"] == 0


def test_a_tool_that_reports_its_own_error_is_not_repeated(spans, clock):
    attempts = []

    def lookup(sku: str) -> str:
        attempts.append(sku)
        raise ToolException("no such sku")

    tool = StructuredTool.from_function(
        lookup, name="lookup", description="Find a SKU.", handle_tool_error=True
    )
    agent = create_agent(
        scripted([[("lookup", {"sku": "X"})]]),
        tools=[tool],
        middleware=[
            RetryBoundaryMiddleware(
                {"lookup": Declaration.read()}, tracer_provider=spans.provider, sleep=clock.sleep
            )
        ],
    )
    state = agent.invoke({"messages": [("user", "?")]}, CONFIG)
    shown = json.loads(tool_messages(state)["c1"].content)
    assert (shown["status"], shown["error_code"]) == ("permanent_error", "tool_error")
    assert "no such sku" in shown["message"] and attempts == ["X"]


def test_a_langgraph_tool_node_runs_behind_the_boundary(spans, clock):
    desk = SupportDesk(faults={("get_order", 1): 503, ("send_email", 1): "commit_then_timeout"})
    model = scripted([[("get_order", {"order_id": "A-1001"}), ("send_email", EMAIL)]])
    tools = desk_tools(desk)
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node(
        "tools",
        guarded_tool_node(
            tools,
            support_declarations(desk),
            tracer_provider=spans.provider,
            sleep=clock.sleep,
            clock=clock,
        ),
    )
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    state = graph.compile().invoke({"messages": [("user", "help")]}, CONFIG)
    shown = tool_messages(state)
    assert shown["c1"].status == "success" and shown["c2"].status == "error"
    assert json.loads(shown["c2"].content)["status"] == "unsafe_retry"
    assert desk.calls["get_order"] == 2 and desk.calls["send_email"] == 1
    statuses = sorted(spans.attrs(c)["toolspan.status"] for c in spans.calls())
    assert statuses == ["succeeded", "unsafe_retry"]


def test_an_interrupt_passes_through_and_the_resumed_write_runs_once(spans, clock):
    approvals: list[str] = []

    def refund(order_id: str) -> str:
        """Refund, once a person approved it."""
        approvals.append(interrupt({"approve refund": order_id}))
        return f"refunded {order_id}"

    agent = create_agent(
        scripted([[("refund", {"order_id": "A-1"})]]),
        tools=[StructuredTool.from_function(refund)],
        middleware=[
            RetryBoundaryMiddleware(
                {"refund": Declaration.write(idempotent=True, key_passed="scripted")},
                safeguards=Safeguards(store=MemoryStore()),
                tracer_provider=spans.provider,
                sleep=clock.sleep,
            )
        ],
        checkpointer=InMemorySaver(),
    )
    paused = agent.invoke({"messages": [("user", "refund A-1")]}, CONFIG)
    assert [i.value for i in paused["__interrupt__"]] == [{"approve refund": "A-1"}]
    state = agent.invoke(Command(resume="yes"), CONFIG)
    assert tool_messages(state)["c1"].content == "refunded A-1" and approvals == ["yes"]
    interrupted, resumed = (spans.attrs(c) for c in spans.calls())
    assert (interrupted["toolspan.status"], interrupted["toolspan.error_code"]) == (
        "permanent_error",
        "control_flow",
    )
    assert resumed["toolspan.status"] == "succeeded"
    assert resumed["toolspan.idempotency.key"] == interrupted["toolspan.idempotency.key"]


FAULT_STEPS = st.sampled_from([None, 503, 429, "timeout", "commit_then_timeout"])


@settings(max_examples=40, deadline=None)
@given(
    refund_faults=st.lists(FAULT_STEPS, max_size=4), email_faults=st.lists(FAULT_STEPS, max_size=4)
)
def test_whatever_fails_no_write_happens_twice_and_the_model_is_told_the_truth(
    refund_faults, email_faults
):
    faults = {("refund_order", n): f for n, f in enumerate(refund_faults, 1) if f is not None}
    faults |= {("send_email", n): f for n, f in enumerate(email_faults, 1) if f is not None}
    spans, clock = Spans(), FakeClock()
    try:
        state, desk = run(
            [[("refund_order", REFUND), ("send_email", EMAIL)]], spans, clock, faults=faults
        )
    finally:
        spans.provider.shutdown()
    refund, email = tool_messages(state)["c1"], tool_messages(state)["c2"]
    refunds, emails = (
        desk.side_effects["refund:A-1001"],
        desk.side_effects["email:rider@example.com:Refund"],
    )
    assert refunds <= 1 and emails <= 1 and desk.calls["send_email"] <= 1
    # A success is never invented: the model hears "done" only for an effect that happened.
    assert refund.status == "error" or refunds == 1
    assert email.status == "error" or emails == 1
    for message in (refund, email):
        if message.status == "error":
            assert json.loads(message.content)["ok"] is False
    assert state["messages"][-1].content == "done"  # the run always goes on
