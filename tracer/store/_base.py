"""Shared skeletons: argument checks for every backend, and the rule-applying store.

`CheckedStore` validates arguments once for all backends. `RuleStore` applies the rules
of `_rules` inside a backend's critical section over a few storage primitives; the
memory and SQLite backends are such stores, Redis runs the same rules as Lua scripts.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace

from . import _rules as rules
from ._protocol import Claim

__all__ = ["CheckedStore", "RuleStore"]

_log = logging.getLogger("toolspan.store")


def new_token() -> str:
    return secrets.token_hex(16)


class CheckedStore(ABC):
    """The public `IdempotencyStore` methods: check arguments, then call the backend."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        # This client's view of the store's epoch marker (loss detection, see _rules).
        self._known_epoch: rules.Epoch | None = None
        self._epoch_lock = threading.Lock()

    def _saw_epoch(self, epoch: rules.Epoch, found_loss: bool) -> None:
        """Remember the marker a claim or complete wrote; log a loss once, when found."""
        with self._epoch_lock:
            known = self._known_epoch
            if known is None or known.id != epoch.id or known.seq < epoch.seq:
                self._known_epoch = epoch
        if found_loss:
            _log.error(
                "the idempotency store lost data (restarted empty, flushed, behind what this "
                "worker saw, or replaced); until the record TTL has passed, keys it cannot "
                "find are treated as possibly done: writes are read back or refused"
            )

    def now(self) -> float:
        """The time this store's TTLs count on (epoch seconds, its injected clock)."""
        return self._clock()

    @property
    def known_epoch(self) -> rules.Epoch | None:
        """The store's epoch marker as this client last saw it (None before first use)."""
        return self._known_epoch

    def claim(self, key: str, fingerprint: str, *, lease_s: float, ttl_s: float) -> Claim:
        return self._claim(
            rules.check_name("key", key),
            rules.check_name("fingerprint", fingerprint),
            rules.check_seconds("lease_s", lease_s),
            rules.check_seconds("ttl_s", ttl_s),
        )

    def complete(self, key: str, token: str, result: bytes, *, ttl_s: float) -> bool:
        return self._complete(
            rules.check_name("key", key),
            rules.check_name("token", token),
            rules.check_result(result),
            rules.check_seconds("ttl_s", ttl_s),
        )

    def release(self, key: str, token: str) -> None:
        self._release(rules.check_name("key", key), rules.check_name("token", token))

    def extend(self, key: str, token: str, *, lease_s: float) -> bool:
        return self._extend(
            rules.check_name("key", key),
            rules.check_name("token", token),
            rules.check_seconds("lease_s", lease_s),
        )

    def lapse(self, key: str, token: str) -> None:
        self._lapse(rules.check_name("key", key), rules.check_name("token", token))

    def incr(self, name: str, *, ttl_s: float, by: int = 1) -> int:
        return self._incr(
            rules.check_name("name", name), rules.check_by(by), rules.check_seconds("ttl_s", ttl_s)
        )

    def record_answer(self, name: str, answer: str, *, ttl_s: float) -> int:
        return self._record_answer(
            rules.check_name("name", name),
            rules.check_text("answer", answer),
            rules.check_seconds("ttl_s", ttl_s),
        )

    def answer_count(self, name: str) -> tuple[str, int] | None:
        return self._answer_count(rules.check_name("name", name))

    def put(self, name: str, value: str, *, ttl_s: float) -> None:
        self._put(
            rules.check_name("name", name),
            rules.check_text("value", value),
            rules.check_seconds("ttl_s", ttl_s),
        )

    def get(self, name: str) -> str | None:
        return self._get(rules.check_name("name", name))

    def delete(self, name: str) -> None:
        self._delete(rules.check_name("name", name))

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _claim(self, key: str, fingerprint: str, lease_s: float, ttl_s: float) -> Claim: ...

    @abstractmethod
    def _complete(self, key: str, token: str, result: bytes, ttl_s: float) -> bool: ...

    @abstractmethod
    def _release(self, key: str, token: str) -> None: ...

    @abstractmethod
    def _extend(self, key: str, token: str, lease_s: float) -> bool: ...

    @abstractmethod
    def _lapse(self, key: str, token: str) -> None: ...

    @abstractmethod
    def _incr(self, name: str, by: int, ttl_s: float) -> int: ...

    @abstractmethod
    def _record_answer(self, name: str, answer: str, ttl_s: float) -> int: ...

    @abstractmethod
    def _answer_count(self, name: str) -> tuple[str, int] | None: ...

    @abstractmethod
    def _put(self, name: str, value: str, ttl_s: float) -> None: ...

    @abstractmethod
    def _get(self, name: str) -> str | None: ...

    @abstractmethod
    def _delete(self, name: str) -> None: ...


class RuleStore(CheckedStore):
    """A store that applies `_rules` under a critical section over storage primitives.

    The clock is read inside the critical section, so time spent waiting for another
    process's transaction never makes a lease look younger than it is.
    """

    # How long a marker written by a client that never saw the store stays suspect
    # (``Claim.store_new``). Memory and SQLite do not restart empty on their own (a
    # deleted or replaced file is an operator's act, caught by the marker's id).
    _newborn_grace_s = 0.0

    @abstractmethod
    def _critical(self) -> AbstractContextManager[None]:
        """Mutual exclusion over all records (a lock, a write transaction)."""

    @abstractmethod
    def _load_record(self, key: str) -> rules.IdempotencyRecord | None: ...

    @abstractmethod
    def _save_record(self, key: str, record: rules.IdempotencyRecord) -> None: ...

    @abstractmethod
    def _drop_record(self, key: str) -> None: ...

    @abstractmethod
    def _load_guard(self, name: str) -> rules.GuardRecord | None: ...

    @abstractmethod
    def _save_guard(self, name: str, record: rules.GuardRecord) -> None: ...

    @abstractmethod
    def _drop_guard(self, name: str) -> None: ...

    def _purge(self, now: float) -> None:
        """Drop forgotten records (called inside the critical section of a claim)."""

    def _advance_epoch(self, now: float) -> rules.Epoch:
        """Check and move the epoch marker on (inside the critical section)."""
        stored = self._load_guard(rules.EPOCH_NAME)
        epoch, found_loss = rules.advance_epoch(
            None if stored is None else rules.Epoch.decode(stored.text),
            self._known_epoch,
            now=now,
            new_id=new_token(),
        )
        marker = rules.GuardRecord("value", epoch.encode(), 0, rules.EPOCH_FOREVER)
        self._save_guard(rules.EPOCH_NAME, marker)
        self._saw_epoch(epoch, found_loss)
        return epoch

    def _claim(self, key: str, fingerprint: str, lease_s: float, ttl_s: float) -> Claim:
        with self._critical():
            now = self._clock()
            self._purge(now)
            epoch = self._advance_epoch(now)
            decided, record = rules.claim(
                self._load_record(key),
                fingerprint,
                now=now,
                lease_s=lease_s,
                ttl_s=ttl_s,
                new_token=new_token(),
                suspect=epoch.suspects(now, ttl_s),
            )
            if record is not None:
                self._save_record(key, record)
            if decided.store_lost:
                return replace(decided, suspect_for_s=now - (epoch.lost_at or now))
            if decided.outcome == "acquired" and epoch.newborn(now, self._newborn_grace_s):
                return replace(decided, store_new=True, suspect_for_s=now - (epoch.born_at or now))
            return decided

    def _complete(self, key: str, token: str, result: bytes, ttl_s: float) -> bool:
        with self._critical():
            self._advance_epoch(self._clock())
            stored = self._load_record(key)
            record = rules.complete(stored, token, result, now=self._clock(), ttl_s=ttl_s)
            if record is not None:
                self._save_record(key, record)
            return record is not None

    def _release(self, key: str, token: str) -> None:
        with self._critical():
            if rules.owned(self._load_record(key), token, self._clock()) is not None:
                self._drop_record(key)

    def _extend(self, key: str, token: str, lease_s: float) -> bool:
        with self._critical():
            stored = self._load_record(key)
            record = rules.extend(stored, token, now=self._clock(), lease_s=lease_s)
            if record is not None:
                self._save_record(key, record)
            return record is not None

    def _lapse(self, key: str, token: str) -> None:
        self._extend(key, token, 0.0)  # a lease renewed to end now

    # Guard writes sweep forgotten records too (at most every so often, see ``_purge``):
    # an executor whose calls never claim a key (reads, unkeyed writes) still only adds
    # guard records, and memory must not grow with every conversation it ever saw.

    def _incr(self, name: str, by: int, ttl_s: float) -> int:
        with self._critical():
            now = self._clock()
            self._purge(now)
            stored = self._load_guard(name)
            record = rules.incr(stored, name, by=by, now=now, ttl_s=ttl_s)
            self._save_guard(name, record)
            return record.count

    def _record_answer(self, name: str, answer: str, ttl_s: float) -> int:
        with self._critical():
            now = self._clock()
            self._purge(now)
            stored = self._load_guard(name)
            record = rules.record_answer(stored, name, answer, now=now, ttl_s=ttl_s)
            self._save_guard(name, record)
            return record.count

    def _answer_count(self, name: str) -> tuple[str, int] | None:
        with self._critical():
            return rules.answer_count(self._load_guard(name), name, self._clock())

    def _put(self, name: str, value: str, ttl_s: float) -> None:
        with self._critical():
            now = self._clock()
            self._purge(now)
            stored = self._load_guard(name)
            record = rules.put(stored, name, value, now=now, ttl_s=ttl_s)
            self._save_guard(name, record)

    def _get(self, name: str) -> str | None:
        with self._critical():
            return rules.value(self._load_guard(name), name, self._clock())

    def _delete(self, name: str) -> None:
        with self._critical():
            self._drop_guard(name)
