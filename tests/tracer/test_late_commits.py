"""Absence is not proof: three interleavings where a read-back says "absent" too early.

Each replays, step by step on an injected clock, a double charge an independent fault
harness found (issue 26) on a service that ignores keys and is settled by read-back:

1. a **late commit** (SQLite, no store fault): the service commits a request 0.4 s
   after the client's timeout; the read-back ran in between;
2. an **in-flight claim across an empty Redis restart**: worker A's charge is at the
   service when Redis comes back empty; worker B sees the loss, reads back, charges;
3. an **``everysec`` power cut seen first by a newcomer**: the last writes are rolled
   back (an older AOF restored); a worker new to the store claims first;
4. a **live owner whose lease lapsed mid-request** (the project's own chaos bench,
   Redis ``always`` under load 95): worker A's request waits at the service while its
   renewals cannot reach the store; B takes the key over, reads back, charges.

Each test fails on the code before the fix (a second charge in the ledger).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolspan.tracer import NOT_PENDING, Executor, Safeguards, Tool, ToolCall
from toolspan.tracer.store import IdempotencyStore, SQLiteStore
from toolspan.tracer.testing import FakeClock

from ..redis_server import RedisServer
from .conftest import Spans

_WALL = 1_767_225_600.0  # stores decide on wall-clock seconds


class SlowBackend:
    """A payment service behind a gateway: the first request for a ``slow`` order times
    out at the gateway while the backend keeps working; it commits when the test says."""

    def __init__(self, slow: set[str]) -> None:
        self.slow = slow
        self.charges: list[str] = []
        self.working: list[str] = []  # requests the backend still holds

    def charge(self, order_id: str) -> dict[str, Any]:
        if order_id in self.slow:
            self.slow.discard(order_id)
            self.working.append(order_id)
            raise TimeoutError("504 from the gateway; the backend is still working")
        self.charges.append(order_id)
        return {"charge_id": f"ch-{len(self.charges)}"}

    def commit_late(self) -> None:
        """The backend finishes what it held: the charges land after the timeout."""
        self.charges.extend(self.working)
        self.working.clear()

    def status(self, order_id: str) -> dict[str, Any] | None:
        return {"charged": order_id} if order_id in self.charges else None


def _worker(spans: Spans, tool: Tool, store: IdempotencyStore, clock: FakeClock) -> Executor:
    return Executor(
        [tool],
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
        safeguards=Safeguards(store=store, lease_s=5.0, max_attempts_per_action=None),
    )


def _charge(call_id: str, order_id: str = "A-1") -> ToolCall:
    return ToolCall(
        "charge",
        call_id,
        {"order_id": order_id},
        conversation_id=f"conv-{call_id}",
        idempotency_key=f"charge:{order_id}",
    )


# -- 1. a late commit (SQLite) ------------------------------------------------------------


def test_a_commit_after_the_client_timed_out_is_not_charged_twice(
    spans: Spans, tmp_path: Path
) -> None:
    backend = SlowBackend(slow={"A-1"})
    clock = FakeClock(start=_WALL)
    tool = Tool(
        "charge",
        backend.charge,
        side_effect="write",
        read_back=backend.status,
        commit_window_s=2.0,
    )
    a = _worker(spans, tool, SQLiteStore(tmp_path / "store.db", clock=clock), clock)
    b = _worker(spans, tool, SQLiteStore(tmp_path / "store.db", clock=clock), clock)

    first = a.execute(_charge("a1"))  # times out; the read-back finds nothing yet
    assert (first.status, first.error_code, first.attempts) == (
        "unsafe_retry",
        "unknown_outcome",
        1,
    )
    assert first.retry_after_s == pytest.approx(2.0)
    assert first.next is not None and "2 s" in first.next.instruction
    assert spans.attrs(spans.calls()[-1])["toolspan.read_back"] == "pending"
    assert backend.charges == []
    # The key is held: neither another worker nor the model's retry runs it meanwhile.
    assert b.execute(_charge("b1")).status == "in_progress"
    clock.advance(0.4)
    backend.commit_late()  # the backend lands the charge 0.4 s after the timeout
    assert a.execute(_charge("a2")).status == "in_progress"
    clock.advance(1.7)  # the commit window has passed: absence would now mean absent
    settled = b.execute(_charge("b2"))
    assert (settled.status, settled.reconciled) == ("succeeded", True)
    assert backend.charges == ["A-1"]


def test_a_read_back_that_says_nothing_is_pending_is_trusted_at_once(
    spans: Spans, tmp_path: Path
) -> None:
    clock = FakeClock(start=_WALL)
    charges: list[str] = []
    requests: list[str] = []

    def charge(order_id: str) -> dict[str, Any]:
        requests.append(order_id)
        if len(requests) == 1:
            raise TimeoutError("504 from a gateway that never forwarded the request")
        charges.append(order_id)
        return {"charge_id": "ch-1"}

    def status(order_id: str) -> object:
        # The service's status endpoint also tells whether a request is being worked on.
        return {"charged": order_id} if order_id in charges else NOT_PENDING

    tool = Tool("charge", charge, side_effect="write", read_back=status, commit_window_s=30.0)
    worker = _worker(spans, tool, SQLiteStore(tmp_path / "store.db", clock=clock), clock)
    result = worker.execute(_charge("c1"))
    assert (result.status, result.attempts) == ("succeeded", 2)
    assert charges == ["A-1"]


def test_a_service_that_never_acts_after_it_answered_is_retried_at_once(
    spans: Spans, tmp_path: Path
) -> None:
    clock = FakeClock(start=_WALL)
    charges: list[str] = []
    failures = [TimeoutError("connection reset before the request was read")]

    def charge(order_id: str) -> dict[str, Any]:
        if failures:
            raise failures.pop()
        charges.append(order_id)
        return {"ok": True}

    tool = Tool(
        "charge",
        charge,
        side_effect="write",
        read_back=lambda order_id: {"ok": True} if order_id in charges else None,
        commit_window_s=0.0,
    )
    worker = _worker(spans, tool, SQLiteStore(tmp_path / "store.db", clock=clock), clock)
    assert worker.execute(_charge("c1")).attempts == 2
    assert charges == ["A-1"]


# -- 4. a live owner whose lease lapsed while its request was at the service -------------


def test_a_request_still_in_flight_when_its_lease_lapsed_is_not_raced(
    spans: Spans, tmp_path: Path
) -> None:
    clock = FakeClock(start=_WALL)
    charges: list[str] = []
    seen_by_b: list[str] = []

    def status(order_id: str) -> dict[str, Any] | None:
        return {"charged": order_id} if order_id in charges else None

    def charge_b(order_id: str) -> dict[str, Any]:
        charges.append(order_id)
        return {"charge_id": f"ch-{len(charges)}"}

    def declared(fn: Any) -> Tool:
        # The client gives a request up after 10 s; the service may act 2 s after that.
        return Tool(
            "charge",
            fn,
            side_effect="write",
            read_back=status,
            commit_window_s=2.0,
            attempt_timeout_s=10.0,
        )

    b = _worker(spans, declared(charge_b), SQLiteStore(tmp_path / "store.db", clock=clock), clock)

    def charge_a(order_id: str) -> dict[str, Any]:
        # A's request waits at the service (a lock, a slow backend) for 6 s, longer than
        # `lease_s`; A's renewals time out meanwhile (the lease keeper, on the real clock,
        # never gets to run here). B wants the same action now.
        clock.advance(6.0)
        seen_by_b.append(b.execute(_charge("b1")).status)
        charges.append(order_id)  # then A's request commits
        return {"charge_id": f"ch-{len(charges)}"}

    a = _worker(spans, declared(charge_a), SQLiteStore(tmp_path / "store.db", clock=clock), clock)
    assert a.execute(_charge("a1")).status == "succeeded"
    assert seen_by_b == ["in_progress"]  # before the fix: a takeover, "absent", a charge
    replayed = b.execute(_charge("b2"))
    assert (replayed.status, replayed.replayed) == ("succeeded", True)
    assert charges == ["A-1"]


def test_the_lease_outlasts_a_declared_request_and_its_window() -> None:
    from toolspan.tracer.store import MemoryStore

    guards = Safeguards(store=MemoryStore(), lease_s=5.0)
    assert guards.lease_for(2.0) == 5.0  # a dead owner's request is covered already
    assert guards.lease_for(2.0, attempt_timeout_s=10.0) == 12.0
    assert guards.lease_for(30.0, attempt_timeout_s=1.0) == 45.0


# -- 2. an in-flight claim across an empty Redis restart ----------------------------------


@pytest.mark.slow
def test_a_claim_in_flight_when_redis_restarted_empty_is_held_by_every_worker(
    spans: Spans, redis_server: RedisServer
) -> None:
    from toolspan.tracer.store import RedisStore

    clock = FakeClock(start=_WALL)
    prefix = f"t-{uuid.uuid4().hex}:"
    backend = SlowBackend(slow=set())
    tool = Tool(
        "charge", backend.charge, side_effect="write", read_back=backend.status, commit_window_s=1.0
    )
    b = _worker(spans, tool, RedisStore(redis_server.url, prefix=prefix, clock=clock), clock)
    assert b.execute(_charge("b0", "warm-up")).ok  # B knows the store
    clock.advance(120.0)  # long after the store's first minute
    seen: list[str] = []

    def charge_while_redis_restarts(order_id: str) -> dict[str, Any]:
        # A's request is at the service when Redis comes back empty...
        redis_server.kill()
        redis_server.restart()
        # ...and B, then a worker new to the store, get the same action meanwhile.
        seen.append(b.execute(_charge("b1")).status)
        newcomer = RedisStore(redis_server.url, prefix=prefix, clock=clock)
        seen.append(_worker(spans, tool, newcomer, clock).execute(_charge("c1")).status)
        backend.charges.append(order_id)  # A's request commits now
        return {"charge_id": "ch-a"}

    a_tool = Tool(
        "charge",
        charge_while_redis_restarts,
        side_effect="write",
        read_back=backend.status,
        commit_window_s=1.0,
    )
    a = _worker(spans, a_tool, RedisStore(redis_server.url, prefix=prefix, clock=clock), clock)
    assert a.execute(_charge("a1")).ok
    assert seen == ["in_progress", "in_progress"]
    (b1,) = [s for s in spans.calls() if spans.attrs(s)["gen_ai.tool.call.id"] == "b1"]
    assert spans.attrs(b1)["toolspan.store.lost"] is True
    clock.advance(5.1)  # the lease a lost record could have had is over
    settled = b.execute(_charge("b2"))
    assert (settled.status, settled.reconciled) == ("succeeded", True)
    assert backend.charges == ["warm-up", "A-1"]


# -- 3. an `everysec` power cut seen first by a newcomer ----------------------------------


@pytest.fixture
def everysec_server() -> Iterator[RedisServer]:
    with RedisServer(persistence="everysec") as server:
        yield server


@pytest.mark.slow
def test_an_everysec_rollback_met_first_by_a_new_worker_is_seen_by_both(
    spans: Spans, everysec_server: RedisServer, tmp_path: Path
) -> None:
    import redis

    from toolspan.tracer.store import RedisStore
    from toolspan.tracer.store._rules import Epoch

    clock = FakeClock(start=_WALL)
    prefix = f"t-{uuid.uuid4().hex}:"
    charges: list[str] = []

    def charge(order_id: str) -> dict[str, Any]:
        charges.append(order_id)
        return {"charge_id": f"ch-{len(charges)}"}

    def status(order_id: str) -> dict[str, Any] | None:
        return {"charged": order_id} if order_id in charges else None

    tool = Tool("charge", charge, side_effect="write", read_back=status, commit_window_s=1.0)
    a_store = RedisStore(everysec_server.url, prefix=prefix, clock=clock)
    a = _worker(spans, tool, a_store, clock)
    assert a.execute(_charge("a0", "B-0")).ok
    clock.advance(120.0)  # long after the store's first minute
    everysec_server.snapshot_aof(tmp_path / "aof")  # what the disk holds at the power cut
    assert a.execute(_charge("a1")).ok  # charged and completed; the power cut loses it
    everysec_server.kill()
    everysec_server.restore_aof(tmp_path / "aof")
    everysec_server.restart()

    newcomer = _worker(
        spans, tool, RedisStore(everysec_server.url, prefix=prefix, clock=clock), clock
    )
    again = newcomer.execute(_charge("n1"))
    assert (again.status, again.reconciled) == ("succeeded", True)
    assert spans.attrs(spans.calls()[-1])["toolspan.store.new"] is True
    assert charges == ["B-0", "A-1"]
    assert newcomer.execute(_charge("n2", "D-3")).ok  # a key that is really new
    assert charges == ["B-0", "A-1", "D-3"]
    # The newcomer's steps moved the sequence back past where A had seen it, so the
    # sequence alone no longer shows the rollback; A still sees its writes were lost.
    marker = redis.Redis.from_url(everysec_server.url).get(f"{prefix}epoch")
    assert a_store.known_epoch is not None
    assert Epoch.decode(marker.decode()).seq >= a_store.known_epoch.seq
    clock.advance(1.0)
    claim = a_store.claim("charge:C-2", "fp", lease_s=5.0, ttl_s=600.0)
    assert (claim.outcome, claim.store_lost) == ("acquired", True)


def test_an_unkeyed_repeat_waits_out_the_commit_window_too(spans: Spans) -> None:
    # Without a key, the exact repeat in the conversation is read back before it runs;
    # within the window that read-back could not tell, so the repeat is refused.
    from toolspan.tracer.store import MemoryStore

    backend = SlowBackend(slow={"A-1"})
    clock = FakeClock(start=_WALL)
    tool = Tool(
        "charge", backend.charge, side_effect="write", read_back=backend.status, commit_window_s=2.0
    )
    worker = _worker(spans, tool, MemoryStore(clock=clock), clock)

    def unkeyed(call_id: str) -> ToolCall:
        return ToolCall("charge", call_id, {"order_id": "A-1"}, conversation_id="conv")

    assert worker.execute(unkeyed("u1")).error_code == "unknown_outcome"
    assert worker.execute(unkeyed("u2")).status == "in_progress"
    clock.advance(0.4)
    backend.commit_late()
    clock.advance(1.7)
    settled = worker.execute(unkeyed("u3"))
    assert (settled.status, settled.reconciled) == ("succeeded", True)
    assert backend.charges == ["A-1"]
