"""An in-process store: one lock around two dicts. For tests and single-process agents."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from . import _rules as rules
from ._base import RuleStore
from ._protocol import StoreError

__all__ = ["MemoryStore"]

# Forgotten records are swept at most this often (store clock seconds).
_PURGE_EVERY_S = 60.0


class MemoryStore(RuleStore):
    """`IdempotencyStore` in this process's memory, thread-safe.

    Records vanish with the process, so it protects retries within one worker only.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self._lock = threading.Lock()
        self._records: dict[str, rules.IdempotencyRecord] = {}
        self._guards: dict[str, rules.GuardRecord] = {}
        self._next_purge = float("-inf")
        self._closed = False

    def _critical(self) -> _Critical:
        # A plain context manager, not a generator one: every guard of every call of an
        # executor without a store passes here (see ``Safeguards.in_memory``).
        return _Critical(self)

    def _purge(self, now: float) -> None:
        if now < self._next_purge:
            return
        self._next_purge = now + _PURGE_EVERY_S
        self._records = {k: r for k, r in self._records.items() if rules.live(r, now)}
        self._guards = {k: r for k, r in self._guards.items() if rules.live(r, now)}

    def _load_record(self, key: str) -> rules.IdempotencyRecord | None:
        return self._records.get(key)

    def _save_record(self, key: str, record: rules.IdempotencyRecord) -> None:
        self._records[key] = record

    def _drop_record(self, key: str) -> None:
        self._records.pop(key, None)

    def _load_guard(self, name: str) -> rules.GuardRecord | None:
        return self._guards.get(name)

    def _save_guard(self, name: str, record: rules.GuardRecord) -> None:
        self._guards[name] = record

    def _drop_guard(self, name: str) -> None:
        self._guards.pop(name, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._records.clear()
            self._guards.clear()


class _Critical:
    """``MemoryStore``'s critical section: its lock, refused once the store is closed."""

    __slots__ = ("_store",)

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __enter__(self) -> None:
        store = self._store
        store._lock.acquire()
        if store._closed:
            store._lock.release()
            raise StoreError("the memory store is closed")

    def __exit__(self, *_: object) -> None:
        self._store._lock.release()
