"""Fleet state someone else wrote, and clocks that step back: the breaker fails
open and says so once, and is never open longer than ``open_s`` (real SQLite
files and a real redis-server)."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.conftest import Fixed, OpenStores
from toolspan.tracer import CircuitBreaker, RetryBudget
from toolspan.tracer.store import SQLiteStore
from toolspan.tracer.store._fleet import fleet_state
from toolspan.tracer.testing import FakeClock

SERVICE = "pay"
OPEN_S = 15.0


def _open_breaker(store: Any, clock: FakeClock) -> CircuitBreaker:
    breaker = CircuitBreaker(1.0, 1, 10.0, OPEN_S, 1, store=store, clock=clock, rng=Fixed(0.0))
    breaker.record(SERVICE, breaker.admit(SERVICE)[0], failed=True)
    assert not breaker.admit(SERVICE)[0].allowed
    return breaker


def _corrupt_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "was corrupt" in r.getMessage()]


# -- item 20: the breaker's timing is bounded by open_s on any clock -------------------


def test_after_the_clock_steps_back_an_hour_the_breaker_opens_for_open_s_at_most(
    open_stores: OpenStores,
) -> None:
    clock = FakeClock(1_700_000_000.0)
    with open_stores(1) as (store,):
        breaker = _open_breaker(store, clock)
        clock.now -= 3600.0  # NTP stepped the clock back an hour
        admission, transition = breaker.admit(SERVICE)
        assert admission.allowed and admission.state == "half_open" and admission.probe
        assert transition is not None and transition.after == "half_open"
        # The probe's lease is bounded the same way: a probe that never reports
        # frees its slot after open_s on the new timeline.
        clock.advance(OPEN_S)
        assert breaker.admit(SERVICE)[0].probe


def _set_open_until_inf(store: Any) -> None:
    if isinstance(store, SQLiteStore):
        with sqlite3.connect(store._path) as db:
            db.execute("UPDATE fleet_breaker SET open_until = 1e999 WHERE service = ?", (SERVICE,))
    else:
        key = fleet_state(store)._keys(SERVICE, "breaker")[0]  # type: ignore[attr-defined]
        store._client.hset(key, "open_until", "inf")


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("redis", marks=pytest.mark.slow)])
def test_an_open_until_of_infinity_ends_after_open_s(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    clock = FakeClock(1_700_000_000.0)
    store = _store(backend, tmp_path, request)
    try:
        breaker = _open_breaker(store, clock)
        _set_open_until_inf(store)
        admission = breaker.admit(SERVICE)[0]
        assert admission.allowed and admission.state == "half_open"
    finally:
        store.close()


# -- item 18: corrupt state fails open, reset, logged once ----------------------------


def _store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "sqlite":
        return SQLiteStore(tmp_path / "fleet.db")
    import uuid

    from toolspan.tracer.store import RedisStore

    server = request.getfixturevalue("redis_server")
    return RedisStore(server.url, prefix=f"t-{uuid.uuid4().hex}:")


def _sqlite(store: SQLiteStore, sql: str) -> None:
    with sqlite3.connect(store._path) as db:
        db.execute(sql, {"service": SERVICE})


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE fleet_breaker SET open_until = 'soon' WHERE service = :service",
        "UPDATE fleet_breaker SET generation = 'zz' WHERE service = :service",
        "UPDATE fleet_breaker SET open_until = 'nan' WHERE service = :service",
    ],
)
def test_a_corrupt_sqlite_breaker_row_fails_open_and_says_so_once(
    sql: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(1_700_000_000.0)
    store = SQLiteStore(tmp_path / "fleet.db")
    try:
        breaker = _open_breaker(store, clock)
        _sqlite(store, sql)
        with caplog.at_level(logging.WARNING):
            first = breaker.admit(SERVICE)[0]
            breaker.record(SERVICE, first, failed=False)
            again = breaker.admit(SERVICE)[0]
        assert first.allowed and again.allowed and again.state == "closed"
        assert len(_corrupt_warnings(caplog)) == 1
        # The breaker works again afterwards: a window of one failure opens it.
        clock.advance(10.0)
        breaker.record(SERVICE, again, failed=True)
        assert not breaker.admit(SERVICE)[0].allowed
    finally:
        store.close()


def test_corrupt_sqlite_window_counts_fail_open_and_say_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(1_700_000_000.0)
    store = SQLiteStore(tmp_path / "fleet.db")
    try:
        budget = RetryBudget(0.5, 0.0, 10.0, store=store, clock=clock)
        budget.record_first_attempt(SERVICE)
        _sqlite(store, "UPDATE fleet_count SET events = 'many' WHERE service = :service")
        with caplog.at_level(logging.WARNING):
            assert budget.record_first_attempt(SERVICE) is not None
            budget.record_first_attempt(SERVICE)
            verdict = budget.allow_retry(SERVICE)
        assert verdict.allowed and not verdict.failed_open
        assert verdict.first_attempts == 2  # counted afresh after the reset
        assert len(_corrupt_warnings(caplog)) == 1
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "field, value", [("state", "garbage"), ("generation", "zz"), ("open_until", "soon")]
)
def test_a_corrupt_redis_breaker_hash_fails_open_and_says_so_once(
    field: str, value: str, tmp_path: Path, request: pytest.FixtureRequest, caplog: Any
) -> None:
    clock = FakeClock(1_700_000_000.0)
    store = _store("redis", tmp_path, request)
    try:
        breaker = _open_breaker(store, clock)
        key = fleet_state(store)._keys(SERVICE, "breaker")[0]  # type: ignore[attr-defined]
        store._client.hset(key, field, value)
        with caplog.at_level(logging.WARNING):
            first = breaker.admit(SERVICE)[0]
            breaker.record(SERVICE, first, failed=False)
            again = breaker.admit(SERVICE)[0]
        assert first.allowed and again.allowed and not first.failed_open
        assert len(_corrupt_warnings(caplog)) == 1
        clock.advance(10.0)
        breaker.record(SERVICE, again, failed=True)
        assert not breaker.admit(SERVICE)[0].allowed
    finally:
        store.close()


@pytest.mark.slow
def test_a_corrupt_redis_state_seen_first_by_record_is_reset_once(
    tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(1_700_000_000.0)
    store = _store("redis", tmp_path, request)
    try:
        breaker = CircuitBreaker(1.0, 2, 10.0, OPEN_S, 1, store=store, clock=clock)
        admission = breaker.admit(SERVICE)[0]
        key = fleet_state(store)._keys(SERVICE, "breaker")[0]  # type: ignore[attr-defined]
        store._client.hset(key, "state", "garbage")
        with caplog.at_level(logging.WARNING):
            assert breaker.record(SERVICE, admission, failed=False) is None
            assert breaker.admit(SERVICE)[0].allowed
        assert len(_corrupt_warnings(caplog)) == 1
    finally:
        store.close()
