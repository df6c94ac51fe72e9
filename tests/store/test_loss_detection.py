"""A store that lost data is noticed: keys it cannot find are treated as possibly done.

Each way a store loses data is made for real: a Redis server SIGKILLed and restarted
with no persistence, a flushed Redis, an SQLite file swapped for another store's, an
SQLite file rolled back to an earlier copy (what a Redis AOF ``everysec`` restart or a
replica failover does: the store is behind what a client saw).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.tracer.store import MemoryStore, SQLiteStore
from toolspan.tracer.store._rules import Epoch, advance_epoch

from ..redis_server import RedisServer
from .conftest import FakeClock

TTL = 600.0


def _complete(store, key: str) -> None:
    claim = store.claim(key, "fp", lease_s=5, ttl_s=TTL)
    assert claim.outcome == "acquired" and not claim.store_lost
    assert store.complete(key, claim.token, b'{"done":1}', ttl_s=TTL)


# -- the rules --------------------------------------------------------------------


def test_the_marker_rules() -> None:
    fresh, found = advance_epoch(None, None, now=1.0, new_id="a")
    assert (fresh, found) == (Epoch("a", None, 1, born_at=1.0), False)
    moved, found = advance_epoch(fresh, fresh, now=2.0, new_id="b")
    assert (moved, found) == (Epoch("a", None, 2, born_at=1.0), False)
    # written by a client that never saw the store: suspect for the grace only
    assert moved.newborn(now=1.0 + 59, grace_s=60) and not moved.newborn(now=61.0, grace_s=60)
    assert not Epoch("a", 5.0, 2, born_at=1.0).newborn(now=2.0, grace_s=60)  # a loss instead
    # gone: a new marker remembers when the loss was seen
    assert advance_epoch(None, moved, now=3.0, new_id="c") == (Epoch("c", 3.0, 3), True)
    # behind what this client saw
    assert advance_epoch(Epoch("a", None, 1), moved, now=4.0, new_id="d") == (
        Epoch("a", 4.0, 3),
        True,
    )
    # another client saw the loss first: adopt it, no second report
    seen = Epoch("c", 3.0, 5)
    assert advance_epoch(seen, moved, now=5.0, new_id="e") == (Epoch("c", 3.0, 6), False)
    # another store altogether
    assert advance_epoch(Epoch("z", None, 9), moved, now=6.0, new_id="f") == (
        Epoch("z", 6.0, 10),
        True,
    )
    assert Epoch.decode(Epoch("c", 3.5, 7).encode()) == Epoch("c", 3.5, 7)
    assert Epoch.decode(Epoch("c", None, 7, 2.5).encode()) == Epoch("c", None, 7, 2.5)
    assert Epoch.decode("c|3.5|7") == Epoch("c", 3.5, 7)  # the earlier format
    assert Epoch("c", 3.0, 7).suspects(now=3.0 + TTL - 1, ttl_s=TTL)
    assert not Epoch("c", 3.0, 7).suspects(now=3.0 + TTL, ttl_s=TTL)


@given(st.lists(st.sampled_from(["op", "lose", "rollback", "new_client"]), max_size=30))
def test_no_loss_is_missed_by_a_client_that_saw_the_store(events: list[str]) -> None:
    """Any loss a live client could see is reported; no loss, no report."""
    stored, known, history = None, None, []
    for step, event in enumerate(events):
        lost = False
        if event == "lose":
            lost, stored = known is not None, None
        elif event == "rollback" and len(history) > 1:
            lost, stored = stored != history[0], history[0]
        elif event == "new_client":
            known = None
        stored, found = advance_epoch(stored, known, now=float(step), new_id=f"id{step}")
        assert found == (lost and known is not None)
        known = stored
        history.append(stored)


def test_a_server_restart_is_suspect_and_its_base_shows_a_rollback() -> None:
    seen = Epoch("a", None, 7, runs=(("r1", 0),))  # what worker A saw last
    rolled_back = Epoch("a", None, 5, runs=(("r1", 0),))  # an older AOF, reloaded
    # a newcomer steps first: the store is suspect from now, and remembers its base
    first, found = advance_epoch(rolled_back, None, now=10.0, new_id="x", run="r2")
    runs = (("r1", 0), ("r2", 5))
    assert (first, found) == (Epoch("a", None, 6, born_at=10.0, runs=runs), False)
    assert first.newborn(now=11.0, grace_s=60)
    # the newcomer moves the sequence past A's; A still sees it came back behind A,
    # after another restart too
    later = Epoch("a", None, 9, born_at=10.0, runs=(*runs, ("r3", 9)))
    moved, found = advance_epoch(later, seen, now=12.0, new_id="y", run="r3")
    assert (moved.lost_at, moved.seq, found) == (12.0, 10, True)
    # a restart that kept everything A saw is no loss (but suspect for the others)
    kept, found = advance_epoch(seen, seen, now=13.0, new_id="z", run="r4")
    assert (kept.seq, kept.runs[-1], kept.born_at, found) == (8, ("r4", 7), 13.0, False)
    assert Epoch.decode(later.encode()) == later
    assert Epoch.decode("a||7|2.5") == Epoch("a", None, 7, 2.5)  # before runs were kept


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "n", "new_n", "rollback", "restart"]), st.integers(0, 99)),
        max_size=40,
    )
)
def test_a_rollback_is_seen_by_the_client_whose_writes_it_lost(
    events: list[tuple[str, int]],
) -> None:
    """Worker A, and newcomers that may step first after every restart or rollback (a
    power cut under AOF ``everysec`` reloads an earlier state of the same history): A
    sees the loss of anything it saw, however far others moved the sequence since; a
    restart that lost nothing A saw is none. (At most `RUNS_KEPT` restarts apart.)"""
    stored: Epoch | None = None
    a_known: Epoch | None = None
    n_known: Epoch | None = None
    # the current history: each marker with the steps it contains
    history: list[tuple[Epoch, frozenset[int]]] = []
    run, restarts, a_step, restarted = "r0", 0, -1, False
    for step, (event, pick) in enumerate(events):
        now = float(step)
        if event in ("rollback", "restart"):
            restarts += 1
            run, restarted = f"r{restarts}", True
            if event == "rollback" and history:
                history = history[: pick % len(history) + 1]
                stored = history[-1][0]
            continue
        if event == "new_n":
            n_known, event = None, "n"
        contained = history[-1][1] if history else frozenset()
        newcomer_first = event == "n" and n_known is None and restarted and stored is not None
        if event == "a":
            a_lost = a_known is not None and a_step not in contained
            stored, found = advance_epoch(stored, a_known, now=now, new_id=f"id{step}", run=run)
            assert found == a_lost
            a_known, a_step = stored, step
        else:
            stored, _ = advance_epoch(stored, n_known, now=now, new_id=f"id{step}", run=run)
            n_known = stored
            if newcomer_first and stored.lost_at is None:
                assert stored.newborn(now=now, grace_s=60)  # suspect: it cannot vouch
        restarted = False
        history.append((stored, contained | {step}))


# -- every backend ------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


Backend = tuple[Callable[[], object], Callable[[], None]]  # (new client, lose everything)


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.slow)])
def backend(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Backend]:
    made: list[object] = []
    if request.param == "memory":
        shared = MemoryStore(clock=clock)

        def new() -> object:
            return shared

        def lose() -> None:
            shared._records.clear()
            shared._guards.clear()

    elif request.param == "sqlite":
        path = tmp_path / "store.db"

        def new() -> object:
            made.append(SQLiteStore(path, clock=clock))
            return made[-1]

        def lose() -> None:
            with sqlite3.connect(path) as raw:
                raw.execute("DELETE FROM idempotency_record")
                raw.execute("DELETE FROM guard_state")

    else:
        import redis

        from toolspan.tracer.store import RedisStore

        server: RedisServer = request.getfixturevalue("redis_server")
        prefix = f"t-{uuid.uuid4().hex}:"

        def new() -> object:
            made.append(RedisStore(server.url, prefix=prefix, clock=clock))
            return made[-1]

        def lose() -> None:
            redis.Redis.from_url(server.url).flushall()

    yield new, lose
    for store in made:
        store.close()  # type: ignore[attr-defined]


def test_a_store_that_lost_everything_is_noticed(backend: Backend, clock: FakeClock) -> None:
    new, lose = backend
    worker, late_joiner_before = new(), new()
    _complete(worker, "charge-1")
    _complete(late_joiner_before, "charge-2")
    assert worker.claim("charge-1", "fp", lease_s=5, ttl_s=TTL).outcome == "replay"
    lose()
    again = worker.claim("charge-1", "fp", lease_s=5, ttl_s=TTL)
    assert (again.outcome, again.store_lost) == ("acquired", True)
    # Every client learns it from the store, also one that never saw the old marker.
    fresh = new().claim("charge-3", "fp", lease_s=5, ttl_s=TTL)
    assert fresh.store_lost
    # Until the record TTL has passed: then every key the loss could hide is forgotten anyway.
    clock.advance(TTL + 1)
    assert not worker.claim("charge-4", "fp", lease_s=5, ttl_s=TTL).store_lost


def test_no_loss_no_suspicion(backend: Backend) -> None:
    new, _ = backend
    first, second = new(), new()
    for n in range(5):
        _complete(first if n % 2 else second, f"k{n}")
    assert not second.claim("k9", "fp", lease_s=5, ttl_s=TTL).store_lost


def test_a_replaced_sqlite_file_is_noticed(tmp_path: Path, clock: FakeClock) -> None:
    other = SQLiteStore(tmp_path / "other.db", clock=clock)
    _complete(other, "unrelated")
    other.close()
    store = SQLiteStore(tmp_path / "store.db", clock=clock)
    _complete(store, "charge-1")
    _copy_over(tmp_path / "other.db", tmp_path / "store.db")
    claim = store.claim("charge-1", "fp", lease_s=5, ttl_s=TTL)
    assert (claim.outcome, claim.store_lost) == ("acquired", True)
    store.close()


def test_a_store_rolled_back_is_noticed(tmp_path: Path, clock: FakeClock) -> None:
    """As after a Redis AOF `everysec` restart: the marker is there, but behind."""
    store = SQLiteStore(tmp_path / "store.db", clock=clock)
    _complete(store, "charge-1")
    _copy_over(tmp_path / "store.db", tmp_path / "snapshot.db")  # consistent under WAL
    _complete(store, "charge-2")  # the write the rollback loses
    _copy_over(tmp_path / "snapshot.db", tmp_path / "store.db")
    claim = store.claim("charge-2", "fp", lease_s=5, ttl_s=TTL)
    assert (claim.outcome, claim.store_lost) == ("acquired", True)
    store.close()


def _copy_over(source: Path, target: Path) -> None:
    """Replace the database's content in place (open connections see the new content)."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


@contextmanager
def _restarted(persistence: str, clock: FakeClock) -> Iterator[tuple[RedisServer, Any]]:
    """A Redis store that completed ``charge-1``, its server SIGKILLed and restarted."""
    from toolspan.tracer.store import RedisStore

    with RedisServer(persistence=persistence) as server:  # type: ignore[arg-type]
        store = RedisStore(server.url, clock=clock)
        _complete(store, "charge-1")
        server.kill()
        server.restart()
        try:
            yield server, store
        finally:
            store.close()


@pytest.mark.slow
def test_a_redis_restart_without_persistence_is_noticed(clock: FakeClock) -> None:
    with _restarted("none", clock) as (_, store):
        claim = store.claim("charge-1", "fp", lease_s=5, ttl_s=TTL)
        assert (claim.outcome, claim.store_lost) == ("acquired", True)


@pytest.mark.slow
def test_a_redis_restart_with_fsync_always_keeps_everything(clock: FakeClock) -> None:
    with _restarted("always", clock) as (_, store):
        claim = store.claim("charge-1", "fp", lease_s=5, ttl_s=TTL)
        assert (claim.outcome, claim.store_lost) == ("replay", False)


@pytest.mark.slow
def test_a_redis_restart_first_met_by_a_new_worker_is_suspect(clock: FakeClock) -> None:
    # The worker that knew the store is idle; a worker started after the restart claims
    # first and cannot tell the empty store from a new one. Within the grace its claims
    # say so (read back first); the old worker's next claim then finds the loss.
    from toolspan.tracer.store import RedisStore

    with _restarted("none", clock) as (server, old):
        new = RedisStore(server.url, clock=clock)
        first = new.claim("charge-1", "fp", lease_s=5, ttl_s=TTL)
        assert (first.outcome, first.store_lost, first.store_new) == ("acquired", False, True)
        noticed = old.claim("charge-2", "fp", lease_s=5, ttl_s=TTL)
        assert noticed.store_lost and not noticed.store_new
        assert new.claim("charge-3", "fp", lease_s=5, ttl_s=TTL).store_lost
        clock.advance(TTL + 1)
        late = new.claim("charge-4", "fp", lease_s=5, ttl_s=TTL)
        assert not (late.store_lost or late.store_new)
        new.close()


@pytest.mark.slow
def test_a_new_redis_is_suspect_only_for_the_grace(clock: FakeClock) -> None:
    from toolspan.tracer.store import RedisStore
    from toolspan.tracer.store._rules import NEWBORN_GRACE_S

    with RedisServer() as server:
        store = RedisStore(server.url, clock=clock)
        assert store.claim("a", "fp", lease_s=5, ttl_s=TTL).store_new
        clock.advance(NEWBORN_GRACE_S)
        claim = store.claim("b", "fp", lease_s=5, ttl_s=TTL)
        assert (claim.outcome, claim.store_lost, claim.store_new) == ("acquired", False, False)
        store.close()


def test_a_claim_made_after_a_loss_locks_no_arguments_out(
    backend: Backend, clock: FakeClock
) -> None:
    # A reuse of the key with other arguments, claimed after the loss, whose worker died
    # in flight: the store does not know the key's arguments, so its record conflicts
    # with none; the original arguments take it over (and read back) once its lease ran out.
    new, lose = backend
    worker = new()
    _complete(worker, "charge-1")
    lose()
    reuse = worker.claim("charge-1", "fp-other", lease_s=5, ttl_s=TTL)
    assert (reuse.outcome, reuse.store_lost) == ("acquired", True)
    assert worker.claim("charge-1", "fp", lease_s=5, ttl_s=TTL).outcome == "in_progress"
    clock.advance(5)
    assert worker.claim("charge-1", "fp", lease_s=5, ttl_s=TTL).outcome == "takeover"
