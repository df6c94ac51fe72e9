"""Fixtures for the store suite: a fake clock, a real redis-server, one store per backend."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.redis_server import RedisServer
from toolspan.tracer import testing
from toolspan.tracer.store import MemoryStore, SQLiteStore
from toolspan.tracer.store._base import CheckedStore

BACKENDS = ["memory", "sqlite", pytest.param("redis", marks=pytest.mark.slow)]


class FakeClock(testing.FakeClock):
    """The tracer's one fake clock, read as wall-clock seconds (stores expire by them)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        super().__init__(now)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


StoreFactory = Callable[[FakeClock], CheckedStore]


def make_store_factory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[StoreFactory]:
    """Yield a factory of stores sharing one backend (same file, same Redis prefix)."""
    made: list[CheckedStore] = []
    shared_memory: dict[int, MemoryStore] = {}

    def factory(clock: FakeClock) -> CheckedStore:
        store: CheckedStore
        if backend == "memory":
            # one process: every handle is the same store
            store = shared_memory.setdefault(0, MemoryStore(clock=clock))
        elif backend == "sqlite":
            store = SQLiteStore(tmp_path / "store.db", clock=clock)
        else:
            from toolspan.tracer.store import RedisStore

            server: RedisServer = request.getfixturevalue("redis_server")
            store = RedisStore(server.url, prefix=prefix, clock=clock)
        made.append(store)
        return store

    prefix = f"test-{uuid.uuid4().hex}:"
    yield factory
    for store in made:
        store.close()


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    yield from make_store_factory(request.param, tmp_path, request)


@pytest.fixture
def store(store_factory: StoreFactory, clock: FakeClock) -> CheckedStore:
    return store_factory(clock)
