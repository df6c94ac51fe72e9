"""A store in one SQLite file, correct across threads and processes on one machine.

Every operation is one ``BEGIN IMMEDIATE`` transaction: SQLite takes the database's
write lock up front, so read-decide-write never interleaves with another process.
WAL mode keeps readers off the writers' path, and the busy timeout makes waiting
writers queue instead of failing. Each process opens its own connection lazily (a
connection must not cross ``fork``), shared by its threads under a lock.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..._sql import load_statements
from .._errors import ConfigurationError
from . import _rules as rules
from ._base import RuleStore
from ._protocol import StoreError

__all__ = ["SQLiteStore"]

_QUERIES = load_statements(__package__, "sqlite.sql")
_SCHEMA_VERSION = 1
_PURGE_EVERY_S = 60.0

# Connections a child process inherited through fork. Closing them in the child could
# drop locks the parent holds on the file, so they are kept, unused, until exit.
_INHERITED: list[sqlite3.Connection] = []


def enter_wal_mode(
    connection: sqlite3.Connection,
    timeout_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Put the file in WAL mode, waiting up to ``timeout_s`` for other openers.

    Processes that open a new file at once race to change its journal mode. SQLite
    answers the losers ``database is locked`` at once, without its busy handler (each
    holds the shared lock the other would need to give up), so the wait is done here.
    """
    deadline = monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            connection.execute(_QUERIES["wal_mode"])
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or monotonic() >= deadline:
                raise
        sleep(delay)
        delay = min(delay * 2, 0.05)


@dataclass(frozen=True)
class _ProcessConnection:
    pid: int
    connection: sqlite3.Connection
    lock: threading.Lock


class SQLiteStore(RuleStore):
    """`IdempotencyStore` in the SQLite file at ``path`` (created if missing)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(clock)
        self._path = os.fspath(path)
        if self._path in ("", ":memory:") or self._path.startswith("file:"):
            raise ConfigurationError(
                "SQLiteStore needs a file path that processes share; "
                "use MemoryStore for a store inside one process"
            )
        if not isinstance(busy_timeout_s, int | float) or not busy_timeout_s > 0:
            raise ConfigurationError(f"busy_timeout_s must be positive, got {busy_timeout_s!r}")
        self._busy_timeout_s = float(busy_timeout_s)
        self._next_purge = -math.inf
        self._closed = False
        self._active: sqlite3.Connection | None = None
        self._process: _ProcessConnection | None = None
        self._connection()  # open now, so a bad path fails here and not mid-call

    def _connection(self) -> _ProcessConnection:
        if self._closed:
            raise StoreError("the SQLite store is closed")
        current = self._process
        if current is None or current.pid != os.getpid():
            if current is not None:
                _INHERITED.append(current.connection)
            current = _ProcessConnection(os.getpid(), self._open(), threading.Lock())
            self._process = current
            self._next_purge = -math.inf
        return current

    def _open(self) -> sqlite3.Connection:
        try:
            connection = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout_s,
                isolation_level=None,  # autocommit: transactions are explicit
                check_same_thread=False,  # shared by this process's threads under a lock
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite store {self._path!r}: {exc}") from exc
        try:
            enter_wal_mode(connection, self._busy_timeout_s)
            connection.execute(_QUERIES["full_sync"])
            version = connection.execute(_QUERIES["schema_version"]).fetchone()[0]
            if version == 0:
                connection.executescript(_QUERIES["schema"])
            elif version != _SCHEMA_VERSION:
                raise StoreError(
                    f"{self._path!r} has store schema version {version}; "
                    f"this toolspan reads version {_SCHEMA_VERSION}"
                )
        except sqlite3.Error as exc:
            connection.close()
            raise StoreError(f"cannot prepare the SQLite store {self._path!r}: {exc}") from exc
        except StoreError:
            connection.close()
            raise
        return connection

    @contextmanager
    def _critical(self) -> Iterator[None]:
        process = self._connection()
        with process.lock:
            connection = process.connection
            try:
                connection.execute(_QUERIES["begin"])
                self._active = connection
                yield
                connection.execute(_QUERIES["commit"])
            except BaseException as exc:
                if connection.in_transaction:
                    connection.execute(_QUERIES["rollback"])
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"SQLite store {self._path!r} failed: {exc}") from exc
                raise
            finally:
                self._active = None

    def _run(self, query: str, /, **params: object) -> list[Any]:
        assert self._active is not None, "storage primitives run inside _critical()"
        return self._active.execute(_QUERIES[query], params).fetchall()

    def _purge(self, now: float) -> None:
        if now < self._next_purge:
            return
        self._next_purge = now + _PURGE_EVERY_S
        self._run("purge_records", now=now)
        self._run("purge_guards", now=now)

    def _load_record(self, key: str) -> rules.IdempotencyRecord | None:
        rows = self._run("load_record", key=key)
        if not rows:
            return None
        fingerprint, state, token, lease_until, forget_at, result = rows[0]
        return rules.IdempotencyRecord(
            fingerprint=str(fingerprint),
            state=rules.record_state(state),
            token=None if token is None else str(token),
            lease_until=float(lease_until),
            forget_at=float(forget_at),
            result=None if result is None else bytes(result),
        )

    def _save_record(self, key: str, record: rules.IdempotencyRecord) -> None:
        self._run(
            "save_record",
            key=key,
            fingerprint=record.fingerprint,
            state=record.state,
            token=record.token,
            lease_until=record.lease_until,
            forget_at=record.forget_at,
            result=record.result,
        )

    def _drop_record(self, key: str) -> None:
        self._run("drop_record", key=key)

    def _load_guard(self, name: str) -> rules.GuardRecord | None:
        rows = self._run("load_guard", name=name)
        if not rows:
            return None
        kind, text, count, forget_at = rows[0]
        return rules.GuardRecord(
            kind=rules.guard_kind(kind),
            text=str(text),
            count=int(count),
            forget_at=float(forget_at),
        )

    def _save_guard(self, name: str, record: rules.GuardRecord) -> None:
        self._run(
            "save_guard",
            name=name,
            kind=record.kind,
            text=record.text,
            count=record.count,
            forget_at=record.forget_at,
        )

    def _drop_guard(self, name: str) -> None:
        self._run("drop_guard", name=name)

    def close(self) -> None:
        process, self._process = self._process, None
        self._closed = True
        if process is not None and process.pid == os.getpid():
            with process.lock:
                process.connection.close()
