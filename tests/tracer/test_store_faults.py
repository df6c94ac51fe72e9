"""The executor when the store itself fails: lost data, an unreachable server.

A store that lost data makes every key it cannot find possibly done: a write is read
back first, or refused when it has no read-back and its service ignores keys. A store
that cannot be reached fails keyed writes closed and leaves reads alone; a claim in
flight when it went away is taken over after its lease and read back, never repeated.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import pytest

from toolspan.tracer import Executor, Safeguards, Tool, ToolCall
from toolspan.tracer.store import MemoryStore
from toolspan.tracer.testing import FakeClock

from ..redis_server import RedisServer
from .conftest import Spans


class Ledger:
    """A deterministic fake payment service: one row per charge it committed."""

    def __init__(self) -> None:
        self.charges: list[str] = []

    def charge(self, order_id: str) -> dict[str, Any]:
        self.charges.append(order_id)
        return {"charge_id": f"ch-{len(self.charges)}"}

    def status(self, order_id: str) -> dict[str, Any] | None:
        return {"charged": order_id} if order_id in self.charges else None


def _executor(spans: Spans, tools: list[Tool], store: Any, **guards: Any) -> Executor:
    clock = FakeClock()
    return Executor(
        tools,
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
        safeguards=Safeguards(store=store, **guards),
    )


def _charge(order_id: str = "A-1", call_id: str = "c1") -> ToolCall:
    return ToolCall(
        "charge",
        call_id,
        {"order_id": order_id},
        conversation_id=f"conv-{call_id}",
        idempotency_key=f"charge:{order_id}",
    )


def _charge_of(amount: int, call_id: str) -> ToolCall:
    """A charge of order A-1 for ``amount``, under the order's key: another amount is
    a reuse of the key with other arguments."""
    return ToolCall(
        "charge",
        call_id,
        {"order_id": "A-1", "amount": amount},
        conversation_id=call_id,
        idempotency_key="charge:A-1",
    )


def _lose_everything(store: MemoryStore) -> None:
    store._records.clear()
    store._guards.clear()


@pytest.mark.parametrize(
    ("declare", "charged_before_loss", "status", "reconciled", "charges"),
    [
        pytest.param({"read_back": True}, True, "succeeded", True, 1, id="read-back-finds-it"),
        # Absent: a request sent before the loss may still be in flight, so the key is
        # held for the lease a lost record could have had (tests/tracer/test_late_commits.py).
        pytest.param({"read_back": True}, False, "in_progress", False, 0, id="read-back-absent"),
        pytest.param({}, True, "store_unavailable", False, 1, id="no-read-back-refused"),
        pytest.param({"idempotent": True}, True, "succeeded", False, 2, id="service-dedupes"),
    ],
)
def test_after_a_loss_a_key_the_store_cannot_find_is_possibly_done(
    spans: Spans,
    declare: dict[str, Any],
    charged_before_loss: bool,
    status: str,
    reconciled: bool,
    charges: int,
) -> None:
    ledger = Ledger()
    store = MemoryStore()
    read_back = (lambda order_id: ledger.status(order_id)) if declare.get("read_back") else None
    tool = Tool(
        "charge",
        ledger.charge,
        side_effect="write",
        idempotent=declare.get("idempotent", False),
        key_passed="scripted" if declare.get("idempotent") else None,
        read_back=read_back,
    )
    executor = _executor(spans, [tool], store)
    assert executor.execute(_charge("warm-up", "c0")).ok  # the store's marker exists
    if charged_before_loss:
        assert executor.execute(_charge()).ok
    _lose_everything(store)
    result = executor.execute(_charge(call_id="c2"))
    assert (result.status, result.reconciled) == (status, reconciled)
    # idempotent=True: the service dedupes on the key, so its second request is no charge
    # (this fake counts requests); without loss detection every row would run again.
    assert len(ledger.charges) - 1 == charges
    span = spans.attrs(spans.calls()[-1])
    assert span["toolspan.store.lost"] is True
    if status == "store_unavailable":
        assert "lost data" in result.message and result.retryable and result.attempts == 0


def test_without_loss_detection_the_lost_key_runs_again(spans: Spans) -> None:
    ledger = Ledger()
    store = MemoryStore()
    tool = Tool("charge", ledger.charge, side_effect="write", read_back=ledger.status)
    executor = _executor(spans, [tool], store, detect_store_loss=False)
    assert executor.execute(_charge()).ok
    _lose_everything(store)
    assert executor.execute(_charge(call_id="c2")).ok
    assert ledger.charges == ["A-1", "A-1"]  # the duplicate loss detection prevents


@pytest.mark.parametrize("declare", [{"read_back": True}, {"idempotent": True}])
def test_after_a_loss_a_reused_key_does_not_bind_its_arguments(
    spans: Spans, declare: dict[str, Any]
) -> None:
    # The store forgot which arguments the key ran with. A reuse with other arguments
    # finds the earlier effect (read back, or deduplicated by the service); storing
    # that under the reuse's fingerprint would make the original arguments conflict.
    ledger = Ledger()
    tool = Tool(
        "charge",
        lambda order_id, amount: ledger.charge(order_id),
        side_effect="write",
        idempotent=declare.get("idempotent", False),
        key_passed="scripted" if declare.get("idempotent") else None,
        read_back=(lambda order_id, amount: ledger.status(order_id))
        if declare.get("read_back")
        else None,
    )
    store = MemoryStore()
    executor = _executor(spans, [tool], store)

    assert executor.execute(_charge_of(100, "c1")).ok
    _lose_everything(store)
    reuse = executor.execute(_charge_of(999, "c2"))
    again = executor.execute(_charge_of(100, "c3"))
    assert (reuse.status, again.status) == ("succeeded", "succeeded")
    if declare.get("read_back"):
        assert reuse.reconciled and again.reconciled
        assert ledger.charges == ["A-1"]
    assert [spans.attrs(s)["toolspan.store.lost"] for s in spans.calls()[-2:]] == [True, True]


@pytest.mark.parametrize("declare", [{"read_back": True}, {"idempotent": True}])
def test_after_an_unknown_outcome_a_reuse_with_other_arguments_is_a_conflict(
    spans: Spans, declare: dict[str, Any]
) -> None:
    # The charge committed but no response came back, and nothing could tell (the
    # read-back failed too). The key keeps its arguments: a reuse with other ones is
    # refused (it used to run or read back, and bind the key to the reuse's arguments).
    ledger = Ledger()
    down = [True]

    def charge(order_id: str, amount: int) -> dict[str, Any]:
        answer = ledger.charge(order_id)
        if down[0]:
            raise TimeoutError("response lost")
        return answer

    def status(order_id: str, amount: int) -> dict[str, Any] | None:
        if down[0]:
            raise ConnectionError("status endpoint down")
        return ledger.status(order_id)

    tool = Tool(
        "charge",
        charge,
        side_effect="write",
        idempotent=declare.get("idempotent", False),
        key_passed="scripted" if declare.get("idempotent") else None,
        read_back=status if declare.get("read_back") else None,
        commit_window_s=0,  # not this test's subject: the service never commits late
    )
    executor = _executor(spans, [tool], MemoryStore(), max_attempts_per_action=None)

    first = executor.execute(_charge_of(100, "c1"))
    assert not first.ok and first.error_code in ("unknown_outcome", "timeout")
    down[0] = False
    reuse = executor.execute(_charge_of(999, "c2"))
    assert reuse.status == "idempotency_conflict" and reuse.attempts == 0
    again = executor.execute(_charge_of(100, "c3"))
    assert again.ok
    if declare.get("read_back"):
        assert again.reconciled and ledger.charges == ["A-1"]


def test_after_a_loss_an_unknown_outcome_does_not_bind_the_key_either(spans: Spans) -> None:
    # A reuse with other arguments claimed after the loss, sent under its key, and got
    # no answer: its record would hold arguments the key may never have run with.
    ledger = Ledger()
    down = [False]

    def charge(order_id: str, amount: int) -> dict[str, Any]:
        answer = ledger.charge(order_id)  # the service dedupes by key; this fake counts
        if down[0]:
            raise TimeoutError("response lost")
        return answer

    tool = Tool("charge", charge, side_effect="write", idempotent=True, key_passed="scripted")
    store = MemoryStore()
    executor = _executor(spans, [tool], store, max_attempts_per_action=None)

    assert executor.execute(_charge_of(100, "c1")).ok
    _lose_everything(store)
    down[0] = True
    assert not executor.execute(_charge_of(999, "c2")).ok
    down[0] = False
    assert executor.execute(_charge_of(100, "c3")).status == "succeeded"


# -- an unreachable Redis ---------------------------------------------------------------


@pytest.mark.slow
def test_while_redis_is_unreachable_writes_fail_closed_and_reads_run(
    spans: Spans, redis_server: RedisServer
) -> None:
    from toolspan.tracer.store import RedisStore

    ledger = Ledger()
    store = RedisStore(redis_server.url, prefix=f"t-{uuid.uuid4().hex}:", timeout_s=0.2)
    tools = [
        Tool("charge", ledger.charge, side_effect="write", read_back=ledger.status),
        Tool("get_order", lambda order_id: {"order_id": order_id}),
    ]
    executor = _executor(spans, tools, store)
    assert executor.execute(_charge("warm-up", "c0")).ok
    redis_server.pause()
    try:
        started = time.monotonic()
        read = executor.execute(ToolCall("get_order", "r1", {"order_id": "A-1"}, "conv"))
        write = executor.execute(_charge())
        took_s = time.monotonic() - started
    finally:
        redis_server.resume()
    assert read.ok and read.attempts == 1
    assert (write.status, write.retryable, write.attempts) == ("store_unavailable", True, 0)
    assert ledger.charges == ["warm-up"]
    assert took_s < 10, "an unreachable store must fail fast, not hang"
    assert executor.execute(_charge(call_id="c2")).ok  # back: the write runs
    assert ledger.charges == ["warm-up", "A-1"]
    store.close()


@pytest.mark.slow
def test_a_claim_in_flight_when_redis_went_away_resumes_without_a_duplicate(
    spans: Spans, redis_server: RedisServer
) -> None:
    from toolspan.tracer.store import RedisStore

    ledger = Ledger()
    wall = FakeClock(start=1_767_225_600.0)
    store = RedisStore(redis_server.url, prefix=f"t-{uuid.uuid4().hex}:", clock=wall, timeout_s=0.2)

    def charge_then_store_goes_away(order_id: str) -> dict[str, Any]:
        answer = ledger.charge(order_id)  # committed at the service
        redis_server.pause()  # ...and the store is gone before toolspan can record it
        return answer

    first = _executor(
        spans,
        [
            Tool(
                "charge",
                charge_then_store_goes_away,
                side_effect="write",
                read_back=ledger.status,
                commit_window_s=1.0,  # the lease (5 s) outlasts it
            )
        ],
        store,
        lease_s=5.0,
    )
    try:
        result = first.execute(_charge())
    finally:
        redis_server.resume()
    assert result.ok  # the model gets the real answer; recording it failed, and was logged
    other_worker = _executor(
        spans,
        [
            Tool(
                "charge",
                ledger.charge,
                side_effect="write",
                read_back=ledger.status,
                commit_window_s=1.0,
            )
        ],
        store,
        lease_s=5.0,
    )
    assert other_worker.execute(_charge(call_id="c2")).status == "in_progress"  # lease runs
    wall.advance(6.0)
    resumed = other_worker.execute(_charge(call_id="c3"))
    assert (resumed.status, resumed.reconciled) == ("succeeded", True)
    assert ledger.charges == ["A-1"]
    store.close()


@pytest.mark.slow
def test_a_worker_new_to_a_redis_that_restarted_empty_reads_back_first(
    spans: Spans, redis_server: RedisServer
) -> None:
    # The workers that knew the store are idle when it comes back empty; a worker started
    # since claims first and cannot tell the empty store from a new one.
    from toolspan.tracer.store import RedisStore

    ledger = Ledger()
    tool = Tool("charge", ledger.charge, side_effect="write", read_back=ledger.status)
    prefix = f"t-{uuid.uuid4().hex}:"
    old = RedisStore(redis_server.url, prefix=prefix)
    assert _executor(spans, [tool], old).execute(_charge()).ok
    redis_server.kill()
    redis_server.restart()  # no persistence: it comes back empty
    new = RedisStore(redis_server.url, prefix=prefix)
    worker = _executor(spans, [tool], new)
    again = worker.execute(_charge(call_id="c2"))
    assert (again.status, again.reconciled, ledger.charges) == ("succeeded", True, ["A-1"])
    assert spans.attrs(spans.calls()[-1])["toolspan.store.new"] is True
    # A key that is really new: read back (absent), run once, its own result stored.
    assert worker.execute(_charge("B-2", "c3")).ok
    replay = worker.execute(_charge("B-2", "c4"))
    assert replay.replayed and ledger.charges == ["A-1", "B-2"]
    old.close()
    new.close()
