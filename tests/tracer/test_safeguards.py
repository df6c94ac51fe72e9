"""Idempotency, turn budget, loop guard and who-retried, through the executor.

The same scenarios run on the in-memory and the SQLite store (the store
behaviour suite covers Redis; the chaos test runs the executor on Redis).
"""

from __future__ import annotations

import random
import threading

import pytest

from toolspan.tracer import Executor, Safeguards, Tool, ToolCall, ToolError
from toolspan.tracer.store import MemoryStore, SQLiteStore, StoreError
from toolspan.tracer.testing import FakeClock

from .conftest import Scripted


def build(spans, tools, store, **guard_options):
    clock = FakeClock()
    return Executor(
        tools,
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
        safeguards=Safeguards(store=store, **guard_options),
    )


def charge(key="order-1:charge", call_id="c1", amount=5, conversation="conv", request="req-1"):
    return ToolCall(
        "charge",
        call_id,
        {"order_id": "order-1", "amount": amount},
        conversation_id=conversation,
        request_id=request,
        idempotency_key=key,
    )


def test_same_key_same_arguments_replays_without_executing(spans, store):
    fake = Scripted({"charge_id": "ch_1"})
    executor = build(
        spans,
        [Tool("charge", fake, side_effect="write", idempotent=True, key_passed="scripted")],
        store,
    )
    first = executor.execute(charge(call_id="c1"))
    again = executor.execute(charge(call_id="c2"))  # the model re-planned the same step
    assert first.data == again.data == {"charge_id": "ch_1"}
    assert (again.replayed, again.attempts, len(fake.calls)) == (True, 0, 1)
    replay_span = spans.calls()[-1]
    assert spans.attrs(replay_span)["toolspan.idempotency.replayed"] is True
    assert (
        spans.attrs(replay_span)["toolspan.result.hash"]
        == spans.attrs(spans.calls()[0])["toolspan.result.hash"]
    )


def test_same_key_other_arguments_is_a_conflict_and_runs_nothing(spans, store):
    fake = Scripted({"charge_id": "ch_1"})
    executor = build(
        spans,
        [Tool("charge", fake, side_effect="write", idempotent=True, key_passed="scripted")],
        store,
    )
    executor.execute(charge(amount=5))
    conflict = executor.execute(charge(amount=500, call_id="c2"))
    assert (conflict.status, conflict.retryable, len(fake.calls)) == (
        "idempotency_conflict",
        False,
        1,
    )


def test_in_flight_key_gives_in_progress(spans, store):
    started, release = threading.Event(), threading.Event()
    outcomes = []

    def slow_charge(order_id, amount):
        started.set()
        release.wait(5)
        return {"charge_id": "ch_1"}

    executor = build(
        spans,
        [Tool("charge", slow_charge, side_effect="write", idempotent=True, key_passed="scripted")],
        store,
    )
    worker = threading.Thread(target=lambda: outcomes.append(executor.execute(charge())))
    worker.start()
    assert started.wait(5)
    busy = executor.execute(charge(call_id="c2"))
    release.set()
    worker.join(5)
    assert (busy.status, busy.retryable, busy.attempts) == ("in_progress", True, 0)
    assert outcomes[0].status == "succeeded"


def test_failures_are_not_stored_so_a_later_call_may_run(spans, store):
    fake = Scripted(ToolError.from_status(400), {"charge_id": "ch_2"})
    executor = build(
        spans,
        [Tool("charge", fake, side_effect="write", idempotent=True, key_passed="scripted")],
        store,
    )
    assert executor.execute(charge()).status == "permanent_error"
    later = executor.execute(charge(call_id="c2"))
    assert (later.status, later.replayed, len(fake.calls)) == ("succeeded", False, 2)


def test_unknown_outcome_is_read_back_by_the_next_call(spans, store):
    ledger: list[str] = []

    def legacy_charge(order_id, amount):
        ledger.append(order_id)
        raise TimeoutError  # committed, response lost

    def read_back(order_id, amount):
        return {"charge_id": "ch_x"} if order_id in ledger else None

    charge_tool = Tool("charge", legacy_charge, side_effect="write", read_back=read_back)
    executor = build(spans, [charge_tool], store)
    # The first call's own read-back settles it at once.
    first = executor.execute(charge())
    assert (first.status, first.reconciled, len(ledger)) == ("succeeded", True, 1)
    assert executor.execute(charge(call_id="c2")).replayed


def test_an_abandoned_claim_with_other_arguments_is_still_a_conflict(spans, store):
    store.claim("order-1:charge", "other-arguments", lease_s=1.0, ttl_s=60)
    store.wall.advance(5.0)  # its lease ran out, but the arguments differ
    ran = Scripted({"charge_id": "again"})
    charge_tool = Tool("charge", ran, side_effect="write", read_back=lambda **_: None)
    assert build(spans, [charge_tool], store).execute(charge()).status == "idempotency_conflict"
    assert ran.calls == []


def test_takeover_reads_back_before_executing(spans, store):
    ledger: list[str] = []
    fake_clock = store.wall

    def charge_fn(order_id, amount):
        ledger.append(order_id)
        return {"charge_id": "ch_1"}

    charge_tool = Tool(
        "charge",
        charge_fn,
        side_effect="write",
        read_back=lambda order_id, amount: {"charge_id": "ch_1"} if ledger else None,
    )
    executor = build(spans, [charge_tool], store, lease_s=1.0)
    # Simulate a worker that claimed with the same arguments, committed, then died.
    from toolspan.tracer._canonical import canonical_json
    from toolspan.tracer._canonical import digest as fingerprint

    same = fingerprint(canonical_json({"order_id": "order-1", "amount": 5}), None)
    assert store.claim("order-1:charge", same, lease_s=1.0, ttl_s=60).outcome == "acquired"
    ledger.append("order-1")
    assert executor.execute(charge()).status == "in_progress"  # lease still running
    fake_clock.advance(2.0)
    taken = executor.execute(charge(call_id="c3"))
    assert (taken.status, taken.reconciled, len(ledger)) == ("succeeded", True, 1)
    assert spans.attrs(spans.calls()[-1])["toolspan.read_back"] == "found"
    assert spans.attrs(spans.calls()[-1])["toolspan.idempotency.takeover"] is True


def test_a_worker_that_lost_its_lease_during_the_read_back_does_not_run_the_write(spans, store):
    # Worker A takes a dead worker's key over and reads back; its read-back
    # stalls past the lease, worker B takes the key over in the meantime, reads
    # back (nothing yet) and charges. When A's stale "absent" arrives, A must not
    # charge as well: it checks it still owns the key right before the attempt.
    ledger: list[str] = []
    from toolspan.tracer._canonical import canonical_json
    from toolspan.tracer._canonical import digest as fingerprint

    def charge_fn(order_id, amount):
        ledger.append(order_id)
        return {"charge_id": f"ch_{len(ledger)}"}

    def read_back_b(order_id, amount):
        return {"charge_id": "ch_1"} if ledger else None

    worker_b = build(
        spans,
        [Tool("charge", charge_fn, side_effect="write", read_back=read_back_b)],
        store,
        lease_s=60.0,
    )
    b_result = []

    def stalled_read_back_a(order_id, amount):
        seen = {"charge_id": "ch_1"} if ledger else None  # what A read before stalling
        store.wall.advance(120.0)  # A stalls for two leases
        b_result.append(worker_b.execute(charge(call_id="b1")))
        return seen

    worker_a = build(
        spans,
        [Tool("charge", charge_fn, side_effect="write", read_back=stalled_read_back_a)],
        store,
        lease_s=60.0,
    )
    same = fingerprint(canonical_json({"order_id": "order-1", "amount": 5}), None)
    assert store.claim("order-1:charge", same, lease_s=60.0, ttl_s=3600).outcome == "acquired"
    store.wall.advance(61.0)  # the first owner died: its lease ran out
    a_result = worker_a.execute(charge(call_id="a1"))
    (b,) = b_result
    assert (b.status, b.attempts) == ("succeeded", 1)
    assert (a_result.status, a_result.attempts) == ("in_progress", 0)
    assert ledger == ["order-1"]  # one charge, by B
    assert worker_a.execute(charge(call_id="a2")).replayed  # and A then replays B's result


def test_turn_budget_caps_attempts_per_action_in_a_request(spans, store):
    fake = Scripted(*([ToolError("timeout")] * 10))
    executor = build(spans, [Tool("weather", fake)], store, max_attempts_per_action=5)
    call = ToolCall("weather", "c1", {"city": "Oslo"}, conversation_id="conv", request_id="r1")
    first = executor.execute(call)
    assert (first.status, first.attempts) == ("attempt_limit", 4)
    repair = executor.execute(
        ToolCall("weather", "c2", {"city": "Oslo"}, conversation_id="conv", request_id="r1")
    )
    assert (repair.status, repair.attempts, len(fake.calls)) == ("turn_budget", 1, 5)
    refused = executor.execute(
        ToolCall("weather", "c3", {"city": "Oslo"}, conversation_id="conv", request_id="r1")
    )
    assert (refused.status, refused.attempts, len(fake.calls)) == ("turn_budget", 0, 5)
    other_request = executor.execute(
        ToolCall("weather", "c4", {"city": "Oslo"}, conversation_id="conv", request_id="r2")
    )
    assert other_request.attempts == 4


def test_loop_guard_refuses_the_fourth_identical_answer(spans, store):
    fake = Scripted({"status": "pending"})
    executor = build(spans, [Tool("order_status", fake)], store, loop_threshold=3)
    results = [
        executor.execute(ToolCall("order_status", f"c{i}", {"id": 1}, conversation_id="conv"))
        for i in range(5)
    ]
    assert [r.status for r in results] == ["succeeded"] * 3 + ["loop_blocked"] * 2
    assert len(fake.calls) == 3
    other_conversation = executor.execute(
        ToolCall("order_status", "x", {"id": 1}, conversation_id="other")
    )
    assert other_conversation.ok


def test_replays_are_not_answers_so_a_redelivered_request_is_not_a_loop(spans, store):
    fake = Scripted({"charge_id": "ch_1"})
    tools = [Tool("charge", fake, side_effect="write", idempotent=True, key_passed="scripted")]
    # The same request handled five times (a queue redelivering it), each time
    # by a new executor on the shared store: the key replays, nothing is refused.
    results = [
        build(spans, tools, store, loop_threshold=3).execute(charge(call_id=f"d{i}"))
        for i in range(5)
    ]
    assert [(r.status, r.replayed) for r in results] == [("succeeded", False)] + [
        ("succeeded", True)
    ] * 4
    assert len(fake.calls) == 1


def test_polling_with_progress_is_not_a_loop(spans, store):
    answers = [{"status": s} for s in ("queued", "running", "running", "done", "done")]
    fake = Scripted(*answers)
    executor = build(spans, [Tool("job", fake)], store, loop_threshold=3)
    results = [
        executor.execute(ToolCall("job", f"c{i}", {"id": 1}, conversation_id="conv"))
        for i in range(5)
    ]
    assert all(r.ok for r in results)


def test_model_initiated_retry_names_the_failed_call(spans, store):
    fake = Scripted(ToolError.from_status(404), {"ok": 1})
    executor = build(spans, [Tool("lookup", fake)], store)
    executor.execute(ToolCall("lookup", "call_a", {"q": 1}, conversation_id="conv"))
    executor.execute(ToolCall("lookup", "call_b", {"q": 1}, conversation_id="conv"))
    executor.execute(ToolCall("lookup", "call_c", {"q": 1}, conversation_id="conv"))
    first, second, third = (spans.attrs(s) for s in spans.calls())
    assert "toolspan.retry.initiator" not in first
    assert (second["toolspan.retry.initiator"], second["toolspan.retry.of"]) == ("model", "call_a")
    assert "toolspan.retry.initiator" not in third  # call_b succeeded: nothing to repeat


class BrokenStore(MemoryStore):
    def claim(self, *args, **kwargs):
        raise StoreError("redis: connection refused")


def test_a_failing_store_fails_closed(spans):
    fake = Scripted({"charge_id": "ch_1"})
    executor = build(
        spans,
        [Tool("charge", fake, side_effect="write", idempotent=True, key_passed="scripted")],
        BrokenStore(),
    )
    result = executor.execute(charge())
    assert (result.status, result.retryable, fake.calls) == ("store_unavailable", True, [])


def test_a_store_outage_is_logged_at_a_bounded_rate_not_once_per_call(spans, caplog):
    clock = FakeClock()
    fake = Scripted(*([{"charge_id": "ch_1"}] * 3))
    executor = Executor(
        [Tool("charge", fake, side_effect="write", idempotent=True, key_passed="scripted")],
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        clock=clock,
        safeguards=Safeguards(store=BrokenStore()),
    )
    with caplog.at_level("WARNING", logger="toolspan.tracer"):
        for n in range(200):
            assert executor.execute(charge(call_id=f"c{n}")).status == "store_unavailable"
        clock.advance(10.0)
        executor.execute(charge(call_id="after"))
    lines = [r.getMessage() for r in caplog.records if "store failed" in r.getMessage()]
    assert len(lines) == 2  # the first, and one when the interval ran out
    assert "redis: connection refused" in lines[0]
    assert "and 199 more like it" in lines[1]


def test_a_dropped_connection_on_an_unkeyed_write_is_an_unknown_outcome(spans, store):
    ledger: list[str] = []

    def charge_fn(order_id, amount):
        ledger.append(order_id)
        raise ConnectionResetError  # sent, then the connection dropped

    bare = Tool("charge", charge_fn, side_effect="write")
    result = build(spans, [bare], store).execute(charge(key=None))
    assert (result.status, result.error_code, len(ledger)) == ("unsafe_retry", "unknown_outcome", 1)
    checked = Tool(
        "charge",
        charge_fn,
        side_effect="write",
        read_back=lambda order_id, amount: {"charged": amount} if ledger else None,
    )
    settled = build(spans, [checked], store).execute(charge(key=None, call_id="c2"))
    # The repeat of a write left unknown is read back before it runs: the
    # charge happened, so it is not made a second time.
    assert (settled.status, settled.reconciled, len(ledger)) == ("succeeded", True, 1)


def test_a_keyed_write_that_dropped_its_connection_is_read_back_next_time(spans, store):
    ledger: list[str] = []
    answers = iter([ConnectionResetError(), None])

    def charge_fn(order_id, amount):
        ledger.append(order_id)
        answer = next(answers)
        if answer is not None:
            raise answer
        return {"charge_id": "new"}

    tool = Tool(
        "charge",
        charge_fn,
        side_effect="write",
        idempotent=False,
        read_back=lambda order_id, amount: {"charge_id": "ch_1"} if ledger else None,
    )
    first = build(spans, [tool], store).execute(charge())
    assert (first.status, first.reconciled, len(ledger)) == ("succeeded", True, 1)


def test_polling_a_key_in_flight_never_becomes_a_loop(spans, store):
    guards = Safeguards(store=store, loop_threshold=3)
    from toolspan.tracer._canonical import canonical_json
    from toolspan.tracer._canonical import digest as fingerprint

    same = fingerprint(canonical_json({"order_id": "order-1", "amount": 5}), None)
    owner = store.claim("order-1:charge", same, lease_s=60, ttl_s=60)  # another worker runs it
    fake = Scripted({"charge_id": "ch_1"})
    clock = FakeClock()
    executor = Executor(
        [Tool("charge", fake, side_effect="write", idempotent=True, key_passed="scripted")],
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        clock=clock,
        safeguards=guards,
    )
    polls = [executor.execute(charge(call_id=f"p{i}")).status for i in range(5)]
    assert polls == ["in_progress"] * 5
    store.complete("order-1:charge", owner.token, b'{"charge_id":"ch_1"}', ttl_s=60)
    assert executor.execute(charge(call_id="p6")).replayed


@pytest.mark.slow
def test_a_slow_attempt_keeps_its_lease(spans, tmp_path):
    """Real time: the lease is shorter than the attempt, the heartbeat renews it."""
    store = SQLiteStore(tmp_path / "lease.sqlite")  # the real wall clock
    release = threading.Event()
    started = threading.Event()
    ledger: list[int] = []

    def slow_charge(order_id, amount):
        ledger.append(amount)
        started.set()
        release.wait(10)
        return {"charge_id": "ch_1"}

    tool = Tool("charge", slow_charge, side_effect="write", read_back=lambda **_: None)
    executor = Executor(
        [tool], tracer_provider=spans.provider, safeguards=Safeguards(store=store, lease_s=0.3)
    )
    outcomes = []
    worker = threading.Thread(target=lambda: outcomes.append(executor.execute(charge())))
    worker.start()
    assert started.wait(10)
    threading.Event().wait(0.9)  # three leases long
    rival = executor.execute(charge(call_id="rival"))
    release.set()
    worker.join(10)
    assert rival.status == "in_progress"  # not taken over
    assert outcomes[0].status == "succeeded" and ledger == [5]
    store.close()
