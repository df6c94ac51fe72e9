"""Safe defaults without a store: an executor given no ``safeguards`` keeps the
guards' state in this process's memory (README §3)."""

from __future__ import annotations

from typing import Any

from toolspan.tracer import Executor, Safeguards, Tool, ToolCall
from toolspan.tracer.store import MemoryStore
from toolspan.tracer.testing import FakeClock

from .conftest import Scripted, Spans

SMS = {"to": "+15550100", "body": "Your order shipped"}


def sms_call(call_id: str, *, conversation: str = "conv-1", request: str = "req-1") -> ToolCall:
    return ToolCall("send_sms", call_id, SMS, conversation_id=conversation, request_id=request)


def executor(spans: Spans, tools: list[Tool], **options: Any) -> Executor:
    clock = FakeClock()
    return Executor(
        tools, tracer_provider=spans.provider, sleep=clock.sleep, clock=clock, **options
    )


def test_the_models_blind_repeat_of_a_timed_out_sms_is_refused_without_a_store(spans):
    gateway = Scripted(TimeoutError("SMS gateway timed out"), {"sms_id": "s1"})
    status = Tool("get_sms_status", Scripted({"delivered": True}))
    # commit_window_s=0: a gateway that never sends after it answered (within the
    # default window the repeat is held as in_progress: tests/tracer/test_late_commits.py).
    send = Tool(
        "send_sms", gateway, side_effect="write", check_with="get_sms_status", commit_window_s=0
    )
    agent = executor(spans, [send, status])
    first = agent.execute(sms_call("c1"))
    assert (first.status, first.error_code) == ("unsafe_retry", "unknown_outcome")
    repeat = agent.execute(sms_call("c2"))  # the model tries the same send again
    assert repeat.status == "read_back_required" and repeat.next is not None
    assert repeat.next.tools == ("get_sms_status",)
    assert len(gateway.calls) == 1  # sent once, not twice
    # Another conversation is not held back by this one's unknown outcome.
    assert agent.execute(sms_call("c3", conversation="conv-2")).status != "read_back_required"


def test_the_loop_guard_and_the_turn_budget_hold_without_a_store(spans):
    track = Tool("track_shipment", Scripted(*[{"status": "in_transit"}] * 10))
    agent = executor(spans, [track])
    calls = [
        ToolCall("track_shipment", f"c{n}", {"order_id": "A"}, conversation_id="conv-1")
        for n in range(4)
    ]
    statuses = [agent.execute(call).status for call in calls]
    assert statuses == ["succeeded"] * 3 + ["loop_blocked"]

    flaky = Scripted(*[TimeoutError()] * 20)
    budgeted = executor(spans, [Tool("get_order", flaky)])
    order = ToolCall("get_order", "o1", {}, conversation_id="conv-9", request_id="req-9")
    first = budgeted.execute(order)
    again = budgeted.execute(ToolCall("get_order", "o2", {}, "conv-9", request_id="req-9"))
    assert (first.attempts, again.status) == (4, "turn_budget")
    assert again.attempts == 1  # the fifth attempt of the action in this request, then no more


def test_safeguards_none_turns_the_guards_off(spans):
    gateway = Scripted(TimeoutError(), {"sms_id": "s1"})
    agent = executor(spans, [Tool("send_sms", gateway, side_effect="write")], safeguards=None)
    agent.execute(sms_call("c1"))
    assert agent.execute(sms_call("c2")).ok and len(gateway.calls) == 2


def test_each_executor_keeps_its_own_memory_and_a_store_shares_it(spans):
    gateway = Scripted(TimeoutError(), {"sms_id": "s1"})
    tools = [Tool("send_sms", gateway, side_effect="write")]
    executor(spans, tools).execute(sms_call("c1"))
    assert executor(spans, tools).execute(sms_call("c2")).ok  # a fresh process's memory
    shared = Safeguards.in_memory()
    timing_out = [Tool("send_sms", Scripted(TimeoutError()), side_effect="write")]
    executor(spans, timing_out, safeguards=shared).execute(sms_call("c3"))
    again = executor(spans, tools, safeguards=shared).execute(sms_call("c4"))
    assert again.status == "read_back_required" and len(gateway.calls) == 2


def test_guard_state_of_old_conversations_is_swept_without_any_claim():
    """Reads alone (no key ever claimed) must not grow the in-memory guards forever."""
    clock = FakeClock(1_700_000_000.0)
    store = MemoryStore(clock=clock)
    guards = Safeguards(store=store, guard_ttl_s=60.0, detect_store_loss=False)
    agent = Executor([Tool("get_order", Scripted(*[{"ok": 1}] * 200))], safeguards=guards)
    for n in range(100):
        agent.execute(ToolCall("get_order", f"c{n}", {}, f"conv-{n}", request_id=f"r{n}"))
    assert len(store._guards) >= 100
    clock.advance(3600.0)
    agent.execute(ToolCall("get_order", "late", {}, "conv-late", request_id="r-late"))
    assert len(store._guards) < 5


def test_guard_reads_false_exempts_reads_and_named_tools_but_not_writes(spans):
    def guarded(**options: Any) -> Executor:
        tools = [
            Tool("track_shipment", Scripted(*[{"status": "in_transit"}] * 10)),
            Tool("poll_queue", Scripted(*[{"depth": 0}] * 10), side_effect="write"),
            Tool("send_sms", Scripted(*[{"sms_id": "s1"}] * 10), side_effect="write"),
        ]
        return executor(spans, tools, safeguards=Safeguards(store=MemoryStore(), **options))

    def statuses(agent: Executor, name: str) -> list[str]:
        calls = [ToolCall(name, f"{name}-{n}", SMS, conversation_id="conv-1") for n in range(7)]
        return [agent.execute(call).status for call in calls]

    exempt = guarded(guard_reads=False, unguarded_tools=frozenset({"poll_queue"}))
    assert statuses(exempt, "track_shipment") == ["succeeded"] * 7  # a read
    assert statuses(exempt, "poll_queue") == ["succeeded"] * 7  # named: a read by another name
    assert statuses(exempt, "send_sms") == ["succeeded"] * 3 + ["loop_blocked"] * 4
    # The default (and guard_reads=True whatever is named) guards every tool.
    every = guarded(unguarded_tools=frozenset({"poll_queue"}))
    assert statuses(every, "track_shipment") == ["succeeded"] * 3 + ["loop_blocked"] * 4
    assert statuses(every, "poll_queue") == ["succeeded"] * 3 + ["loop_blocked"] * 4
