"""One string names a store on a command line: a Redis URL or a SQLite file."""

from __future__ import annotations

from ._protocol import IdempotencyStore
from ._sqlite import SQLiteStore

__all__ = ["open_store"]

_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def open_store(location: str) -> IdempotencyStore:
    """``redis://host:6379/0`` (also ``rediss://``, ``unix://``) opens a
    :class:`RedisStore` (the ``redis`` extra); anything else is the path of a
    :class:`SQLiteStore` file, with or without a ``sqlite:`` prefix."""
    if location.startswith(_REDIS_SCHEMES):
        from ._redis import RedisStore

        return RedisStore(location)
    return SQLiteStore(location.removeprefix("sqlite:"))
