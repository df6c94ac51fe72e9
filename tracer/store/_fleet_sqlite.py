"""Fleet state of a `SQLiteStore`: tables of their own in the store's file.

Each operation is one ``BEGIN IMMEDIATE`` transaction, so processes on one host share a
budget and a breaker exactly. The fleet tables have their own connection per process,
with ``synchronous=NORMAL``: in WAL mode that skips the fsync on every commit (only
checkpoints sync), which the counters of a window do not need, while the idempotency
records keep the store's full durability on the store's own connection.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..._sql import load_statements
from ._fleet import (
    Admission,
    BreakerSettings,
    BudgetVerdict,
    CircuitState,
    Clock,
    Recorded,
    budget_allows,
    corrupt_state,
    trips,
)
from ._protocol import StoreError
from ._sqlite import SQLiteStore, enter_wal_mode

__all__ = ["SQLiteFleet"]

_QUERIES = load_statements(__package__, "fleet.sql")
_SCHEMA = (
    "create_events", "create_events_index", "create_counts", "create_breakers", "create_probes",
)  # fmt: skip
_STATES: dict[str, CircuitState] = {"closed": "closed", "open": "open", "half_open": "half_open"}


class SQLiteFleet:
    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._path = store._path
        self._timeout_s = store._busy_timeout_s
        self._lock = threading.Lock()
        self._pid = -1
        self._connection: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._store._closed:
            raise StoreError("the SQLite store is closed")
        if self._connection is None or self._pid != os.getpid():
            # A connection inherited through fork is left alone (see _sqlite._INHERITED).
            try:
                connection = sqlite3.connect(
                    self._path, timeout=self._timeout_s, isolation_level=None,
                    check_same_thread=False,
                )  # fmt: skip
                enter_wal_mode(connection, self._timeout_s)
                connection.execute(_QUERIES["no_commit_fsync"])
                connection.execute(_QUERIES["begin"])
                for name in _SCHEMA:
                    connection.execute(_QUERIES[name])
                connection.execute(_QUERIES["commit"])
            except sqlite3.Error as exc:
                raise StoreError(f"cannot prepare fleet state in {self._path!r}: {exc}") from exc
            self._connection, self._pid = connection, os.getpid()
        return self._connection

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            connection = self._connect()
            try:
                connection.execute(_QUERIES["begin"])
                yield connection
                connection.execute(_QUERIES["commit"])
            except BaseException as exc:
                if connection.in_transaction:
                    connection.execute(_QUERIES["rollback"])
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"SQLite fleet state in {self._path!r} failed: {exc}") from exc
                raise

    def _now(self, clock: Clock) -> float:
        return (clock or self._store._clock)()

    @staticmethod
    def _window(db: sqlite3.Connection, service: str, kind: str, before: float) -> tuple[int, int]:
        """Slide the window past ``before``; the events (and failures) left in it."""
        keys = {"service": service, "kind": kind}
        gone, gone_failed = db.execute(
            _QUERIES["expired_events"], {**keys, "before": before}
        ).fetchone()
        if gone:
            db.execute(_QUERIES["trim_events"], {**keys, "before": before})
            db.execute(_QUERIES["uncount_events"], {**keys, "events": gone, "failed": gone_failed})
        row = db.execute(_QUERIES["count_events"], keys).fetchone()
        if row is None:
            return 0, 0
        if type(row[0]) is not int or type(row[1]) is not int:
            db.execute(_QUERIES["forget_window"], keys)
            db.execute(_QUERIES["forget_count"], keys)
            corrupt_state(service, f"{kind} window count {row[0]!r}"[:80], "SQLite")
            return 0, 0
        return row[0], row[1]

    @staticmethod
    def _add(db: sqlite3.Connection, service: str, kind: str, at: float, failed: bool) -> None:
        params = {"service": service, "kind": kind, "at": at, "failed": int(failed)}
        db.execute(_QUERIES["add_event"], params)
        db.execute(
            _QUERIES["count_event"], {"service": service, "kind": kind, "failed": int(failed)}
        )

    def budget_first(self, service: str, window_s: float, clock: Clock) -> float:
        with self._transaction() as db:
            now = self._now(clock)
            self._window(db, service, "first", now - window_s)
            self._add(db, service, "first", now, False)
            return now

    def budget_retry(
        self, service: str, ratio: float, floor: float, window_s: float, clock: Clock
    ) -> BudgetVerdict:
        with self._transaction() as db:
            now = self._now(clock)
            firsts, _ = self._window(db, service, "first", now - window_s)
            retries, _ = self._window(db, service, "retry", now - window_s)
            limit = ratio * firsts + floor * window_s
            if not budget_allows(retries, firsts, ratio, floor, window_s):
                return BudgetVerdict(False, now, retries, firsts, limit)
            self._add(db, service, "retry", now, False)
            return BudgetVerdict(True, now, retries + 1, firsts, limit)

    @classmethod
    def _load(cls, db: sqlite3.Connection, service: str) -> tuple[CircuitState, float, int]:
        row = db.execute(_QUERIES["load_breaker"], {"service": service}).fetchone()
        if row is None:
            return "closed", 0.0, 0
        state, open_until, generation = row
        if (
            state in _STATES
            and type(open_until) in (int, float)
            and not math.isnan(open_until)
            and type(generation) is int
        ):
            return _STATES[state], float(open_until), generation
        cls._save(db, service, "closed", 0.0, 0)
        corrupt_state(service, f"breaker {state!r}, {open_until!r}, {generation!r}"[:80], "SQLite")
        return "closed", 0.0, 0

    @staticmethod
    def _save(
        db: sqlite3.Connection, service: str, state: CircuitState, until: float, generation: int
    ) -> None:
        db.execute(
            _QUERIES["save_breaker"],
            {"service": service, "state": state, "open_until": until, "generation": generation},
        )
        if state != "half_open":
            db.execute(_QUERIES["clear_probes"], {"service": service})
            db.execute(_QUERIES["clear_calls"], {"service": service})
            db.execute(_QUERIES["clear_call_count"], {"service": service})

    def breaker_admit(
        self, service: str, settings: BreakerSettings, token: str, clock: Clock
    ) -> Admission:
        with self._transaction() as db:
            now = self._now(clock)
            state, open_until, generation = self._load(db, service)
            if state == "closed":
                return Admission(True, "closed", now, generation=generation)
            opened_half = False
            if state == "open":
                if settings.still_open(now, open_until):
                    return Admission(False, "open", now, generation=generation)
                generation, opened_half = generation + 1, True
                self._save(db, service, "half_open", 0.0, generation)
                db.execute(_QUERIES["clear_probes"], {"service": service})
            latest = now + settings.probe_lease_s  # a later lease end: the clock stepped back
            db.execute(_QUERIES["trim_probes"], {"service": service, "now": now, "latest": latest})
            (probes,) = db.execute(_QUERIES["count_probes"], {"service": service}).fetchone()
            if int(probes) >= settings.half_open_calls:
                return Admission(False, "half_open", now, None, generation, opened_half)
            db.execute(
                _QUERIES["add_probe"],
                {"service": service, "token": token, "until": now + settings.probe_lease_s},
            )
            return Admission(True, "half_open", now, token, generation, opened_half)

    def breaker_record(
        self,
        service: str,
        settings: BreakerSettings,
        probe: str | None,
        failed: bool,
        open_for_s: float,
        clock: Clock,
    ) -> Recorded:
        with self._transaction() as db:
            now = self._now(clock)
            before, _, generation = self._load(db, service)
            if probe is not None:
                dropped = db.execute(_QUERIES["drop_probe"], {"service": service, "token": probe})
                if dropped.rowcount and before == "half_open":
                    after: CircuitState = "open" if failed else "closed"
                    self._save(db, service, after, now + open_for_s if failed else 0.0, generation)
                    return Recorded(before, after, now)
            if before != "closed":
                return Recorded(before, before, now)
            calls, failures = self._window(db, service, "call", now - settings.window_s)
            self._add(db, service, "call", now, failed)
            if not trips(calls + 1, failures + failed, settings):
                return Recorded("closed", "closed", now)
            self._save(db, service, "open", now + open_for_s, generation)
            return Recorded("closed", "open", now)

    def breaker_release(self, service: str, probe: str) -> None:
        with self._transaction() as db:
            db.execute(_QUERIES["drop_probe"], {"service": service, "token": probe})
