"""Idempotency stores: who may execute a keyed write, and small atomic guard state.

Three backends behind `IdempotencyStore`: `MemoryStore` (one process), `SQLiteStore`
(one file, processes on one machine) and `RedisStore` (workers on many machines, needs
the ``redis`` extra; imported on first use).

Errors: a failing backend raises `StoreError` (a ``ToolspanError``, see the one tree
in ``common/_errors.py``) from the backend's
exception; invalid store settings raise ``ConfigurationError``; invalid call arguments
(an empty key, a non-positive lease, a result that is not bytes) raise ``ValueError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._keys import derive_key
from ._memory import MemoryStore
from ._open import open_store
from ._protocol import Claim, ClaimOutcome, IdempotencyStore, StoreError
from ._sqlite import SQLiteStore

if TYPE_CHECKING:
    from ._redis import RedisStore

__all__ = [
    "Claim",
    "ClaimOutcome",
    "IdempotencyStore",
    "MemoryStore",
    "RedisStore",
    "SQLiteStore",
    "StoreError",
    "derive_key",
    "open_store",
]


def __getattr__(name: str) -> object:
    # RedisStore imports the optional redis client, so only when asked for.
    if name == "RedisStore":
        from ._redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
