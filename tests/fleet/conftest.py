"""Fixtures for budgets and breakers: handles on one store of every backend."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from tests.redis_server import RedisServer
from tests.store.conftest import redis_server
from toolspan.tracer.store import IdempotencyStore, MemoryStore, SQLiteStore

__all__ = ["BACKENDS", "Fixed", "OpenStores", "redis_server"]

BACKENDS = ["memory", "sqlite", pytest.param("redis", marks=pytest.mark.slow)]

# open_stores(n): n handles on one shared store (separate connections for SQLite and
# Redis, like separate workers; one object for memory), closed on leaving.
OpenStores = Callable[[int], AbstractContextManager[list[IdempotencyStore]]]


class Fixed(random.Random):
    """A random source that always draws ``value``: a predictable jitter."""

    def __init__(self, value: float = 0.0) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.fixture(params=BACKENDS)
def open_stores(request: pytest.FixtureRequest, tmp_path: Path) -> OpenStores:
    backend: str = request.param

    @contextmanager
    def opened(n: int) -> Iterator[list[IdempotencyStore]]:
        handles: list[IdempotencyStore]
        if backend == "memory":
            handles = [MemoryStore()] * n
        elif backend == "sqlite":
            path = tmp_path / f"{uuid.uuid4().hex}.db"
            handles = [SQLiteStore(path) for _ in range(n)]
        else:
            from toolspan.tracer.store import RedisStore

            server: RedisServer = request.getfixturevalue("redis_server")
            prefix = f"test-{uuid.uuid4().hex}:"
            handles = [RedisStore(server.url, prefix=prefix) for _ in range(n)]
        try:
            yield handles
        finally:
            for handle in handles:
                handle.close()

    return opened
