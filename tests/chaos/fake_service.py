"""A deterministic, flaky payment service shared by every worker process.

The service is "remote": its state is a SQLite ledger file that each call
writes in its own transaction, so side effects are real across processes
and survive a worker killed with SIGKILL. Some requests commit late: the
client times out at once while the service keeps working and commits up to
half a second later (a gateway timeout in front of a slow backend), plus its wait
for the ledger (at most ``REQUEST_WAIT_S``, as for every request). The legacy variant ignores
idempotency keys (each charge request that commits adds a charge row); the
keyed variant deduplicates by the key the client forwards.

Faults are a pure function of (order, attempt number at the service), the
attempt number counted by the service itself, so a run's schedule of faults
does not depend on which worker sends which request.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from toolspan._sql import parse_statements
from toolspan.tracer import ToolError

__all__ = [
    "COMMITTING_FAULTS",
    "FAULTS",
    "IN_FLIGHT_S",
    "LATE_COMMIT_S",
    "ArmedKill",
    "Ledger",
    "LedgerService",
    "fault_for",
]

# What a charge request suffers, by (order, attempt): the service commits
# the charge for the first three, then the client may still see a failure;
# ``late_commit`` times out at the client and commits afterwards.
FAULTS: Final = ("ok", "lost_response", "gateway_error", "timeout", "late_commit", "unavailable")
COMMITTING_FAULTS: Final = frozenset({"ok", "lost_response", "gateway_error"})
# Cumulative percentages of FAULTS for the first attempts of each order.
_THRESHOLDS: Final = (40, 60, 70, 78, 85, 100)
# The longest a late commit lands after the client timed out (each waits 0.1 s to this).
LATE_COMMIT_S: Final = 0.5
# The service's own database timeout: a request (or a late commit) that cannot get
# the ledger within it fails and commits nothing. Without a bound, a request waiting
# on a busy ledger under load stayed at the service for up to 30 s, longer than the
# lease and the commit window the tool declared.
REQUEST_WAIT_S: Final = 0.5
# The longest a request is in flight: its wait for the ledger, and half a second for the
# commit itself (what the tool declares as ``attempt_timeout_s``).
IN_FLIGHT_S: Final = REQUEST_WAIT_S + 0.5
# Reads wait as long as they need (a read-back that fails settles nothing).
_READ_WAIT_S: Final = 30.0


class LedgerBusy(Exception):
    """The ledger stayed locked for longer than the transaction would wait."""


# From this attempt on the service behaves, so every action can finish.
_CALM_FROM_ATTEMPT: Final = 6


def fault_for(order_id: str, attempt: int) -> str:
    """The fault of the ``attempt``-th charge request for ``order_id``."""
    if attempt >= _CALM_FROM_ATTEMPT:
        return "ok"
    digest = hashlib.sha256(f"{order_id}:{attempt}".encode()).digest()
    roll = int.from_bytes(digest[:4], "big") % 100
    return next(fault for fault, top in zip(FAULTS, _THRESHOLDS, strict=True) if roll < top)


def _load_queries() -> dict[str, str]:
    path = Path(__file__).with_name("ledger.sql")
    return parse_statements(path.read_text(encoding="utf-8"), str(path))


_QUERIES: Final = _load_queries()


class Ledger:
    """The ledger file: one connection per process, one transaction per request."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._pid = -1
        self._db: sqlite3.Connection | None = None

    @classmethod
    def create(cls, path: str | os.PathLike[str]) -> Ledger:
        ledger = cls(path)
        ledger._connection().executescript(_QUERIES["schema"])
        return ledger

    def _connection(self) -> sqlite3.Connection:
        if self._db is None or self._pid != os.getpid():
            self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._pid = os.getpid()
        return self._db

    @contextmanager
    def transaction(self, wait_s: float = _READ_WAIT_S) -> Iterator[sqlite3.Connection]:
        """One write transaction, waiting at most ``wait_s`` for the ledger."""
        db = self._connection()
        db.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise LedgerBusy(str(exc)) from exc
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def rows(self, query: str, **params: Any) -> list[tuple[Any, ...]]:
        return self._connection().execute(_QUERIES[query], params).fetchall()

    def close(self) -> None:
        if self._db is not None and self._pid == os.getpid():
            self._db.close()
        self._db = None


@dataclass(frozen=True)
class KillSwitch:
    """Block forever right after committing the first charge of ``order_id``.

    The service writes ``marker`` (holding the caller's pid) first, so the
    test knows the charge is committed and which worker to SIGKILL.
    """

    order_id: str
    marker: str

    def trip(self) -> None:
        staged = f"{self.marker}.{os.getpid()}.tmp"
        Path(staged).write_text(str(os.getpid()), encoding="ascii")
        Path(staged).replace(self.marker)  # atomic: the test never reads half a pid
        while True:  # the worker holding the key dies here
            time.sleep(60)


@dataclass(frozen=True)
class ArmedKill:
    """Repeated kills: whoever commits a charge while ``arm`` exists takes it and blocks.

    The supervisor creates ``arm`` when it wants its next victim; the first worker
    whose charge request finds it renames it (atomic: one winner), commits the charge,
    writes ``marker`` with its pid and blocks, so the response is lost right before
    the kill, as a worker dying mid-request would lose it.
    """

    arm: str
    marker: str

    def take(self) -> bool:
        try:
            Path(self.arm).rename(f"{self.arm}.taken.{os.getpid()}")
        except OSError:
            return False
        return True

    def trip(self) -> None:
        KillSwitch("", self.marker).trip()


class LedgerService:
    """The charge and charge-status endpoints over a ledger."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        honours_keys: bool,
        kill_switch: KillSwitch | None = None,
        armed_kill: ArmedKill | None = None,
    ) -> None:
        self.ledger = ledger
        self.honours_keys = honours_keys
        self.kill_switch = kill_switch
        self.armed_kill = armed_kill

    def charge(self, order_id: str, amount: int, idempotency_key: str | None) -> dict[str, Any]:
        """POST /charges: commits (or, keyed, finds) a charge, then maybe fails anyway."""
        key = idempotency_key if self.honours_keys else None
        try:
            return self._charge(order_id, amount, key)
        except LedgerBusy:
            # Nothing was logged or committed: the attempt count is unchanged too.
            raise ToolError.from_status(503, "HTTP 503 from the payment service (busy)") from None

    def _charge(self, order_id: str, amount: int, key: str | None) -> dict[str, Any]:
        with self.ledger.transaction(wait_s=REQUEST_WAIT_S) as db:
            (earlier,) = db.execute(_QUERIES["count_charge_requests"], {"order_id": order_id})
            attempt = int(earlier[0]) + 1
            blocks = self._blocks(order_id, attempt)
            fault = "ok" if blocks else fault_for(order_id, attempt)
            armed = self.armed_kill
            killed_here = (
                armed is not None and fault in COMMITTING_FAULTS and not blocks and armed.take()
            )
            if killed_here:
                fault = "ok"  # committed; the response never leaves
            _log_request(db, "charge", order_id, amount, attempt, fault)
            charge = None
            if fault in COMMITTING_FAULTS:
                charge = self._commit(db, order_id, amount, attempt, key)
        if fault == "late_commit":
            self._commit_later(order_id, amount, attempt, key)
        if blocks and self.kill_switch is not None:
            self.kill_switch.trip()
        if killed_here and self.armed_kill is not None:
            self.armed_kill.trip()
        return _respond(fault, charge)

    def charge_status(self, order_id: str) -> dict[str, Any] | None:
        """GET /charges?order_id=: the committed charge of the order, or None."""
        with self.ledger.transaction() as db:
            _log_request(db, "status", order_id, 0, 0, "ok")
            found = db.execute(_QUERIES["charge_by_order"], {"order_id": order_id}).fetchone()
        return None if found is None else _as_charge(found)

    def _commit_later(self, order_id: str, amount: int, attempt: int, key: str | None) -> None:
        """The backend keeps working after the client gave up, and commits 0.1 s to
        `LATE_COMMIT_S` later (unless its process is killed first: then never)."""
        digest = hashlib.sha256(f"late:{order_id}:{attempt}".encode()).digest()
        delay_s = 0.1 + (LATE_COMMIT_S - 0.1) * digest[0] / 255

        def land() -> None:
            time.sleep(delay_s)
            ledger = Ledger(self.ledger.path)  # a connection of the backend's own
            try:
                with ledger.transaction(wait_s=REQUEST_WAIT_S) as db:
                    self._commit(db, order_id, amount, attempt, key)
            except LedgerBusy:
                pass  # the backend's own database call timed out: it never commits
            finally:
                ledger.close()

        # Not a daemon: a worker that finishes its plan waits for its requests to land.
        threading.Thread(target=land, name="late-commit").start()

    def _blocks(self, order_id: str, attempt: int) -> bool:
        switch = self.kill_switch
        return switch is not None and switch.order_id == order_id and attempt == 1

    @staticmethod
    def _commit(
        db: sqlite3.Connection, order_id: str, amount: int, attempt: int, key: str | None
    ) -> dict[str, Any]:
        if key is not None:
            existing = db.execute(_QUERIES["charge_by_key"], {"key": key}).fetchone()
            if existing is not None:  # a repeat of a keyed request: no new effect
                return _as_charge(existing)
        charge_id = f"ch-{order_id}-{attempt}"
        db.execute(
            _QUERIES["insert_charge"],
            {"charge_id": charge_id, "order_id": order_id, "amount": amount, "key": key},
        )
        return {"charge_id": charge_id, "order_id": order_id, "amount": amount}


def _log_request(
    db: sqlite3.Connection, kind: str, order_id: str, amount: int, attempt: int, fault: str
) -> None:
    db.execute(
        _QUERIES["log_request"],
        {
            "kind": kind,
            "order_id": order_id,
            "amount": amount,
            "attempt": attempt,
            "fault": fault,
            "pid": os.getpid(),
        },
    )


def _as_charge(row: tuple[Any, ...]) -> dict[str, Any]:
    charge_id, order_id, amount = row
    return {"charge_id": charge_id, "order_id": order_id, "amount": amount}


def _respond(fault: str, charge: dict[str, Any] | None) -> dict[str, Any]:
    """What the client sees: the charge, or the failure the fault stands for."""
    if fault == "ok" and charge is not None:
        return charge
    if fault in ("lost_response", "timeout", "late_commit"):
        raise TimeoutError(f"charge request timed out ({fault})")
    status = 502 if fault == "gateway_error" else 503
    raise ToolError.from_status(status, f"HTTP {status} from the payment service")
