"""RedisStore specifics: key layout, garbage-collection TTLs, clients, failures."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from tests.redis_server import RedisServer
from tests.store.conftest import FakeClock
from toolspan.tracer import ConfigurationError
from toolspan.tracer.store import RedisStore, StoreError
from toolspan.tracer.store._redis import _GC_MARGIN_S

pytestmark = pytest.mark.slow


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex}:"


def test_records_carry_a_generous_garbage_collection_ttl(client: redis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix, clock=FakeClock())
    token = store.claim("k", "fp", lease_s=30, ttl_s=600).token
    assert token is not None
    key = f"{prefix}idem:k"
    assert (630 + _GC_MARGIN_S - 1) * 1000 < client.pttl(key) <= (630 + _GC_MARGIN_S) * 1000
    store.complete("k", token, b"1", ttl_s=86400)
    assert (86400 + _GC_MARGIN_S - 1) * 1000 < client.pttl(key) <= (86400 + _GC_MARGIN_S) * 1000
    store.incr("n", ttl_s=60)
    assert 0 < client.pttl(f"{prefix}guard:n") <= (60 + _GC_MARGIN_S) * 1000


def test_decisions_follow_the_record_timestamps_not_the_redis_ttl(
    client: redis.Redis, prefix: str
) -> None:
    clock = FakeClock()
    store = RedisStore(client, prefix=prefix, clock=clock)
    store.claim("k", "fp", lease_s=30, ttl_s=600)
    clock.advance(630)
    assert client.exists(f"{prefix}idem:k"), "redis still holds the key"
    assert store.claim("k", "other", lease_s=30, ttl_s=600).outcome == "acquired"


def test_prefixes_isolate_stores(client: redis.Redis, prefix: str) -> None:
    first = RedisStore(client, prefix=prefix + "a:")
    second = RedisStore(client, prefix=prefix + "b:")
    assert first.claim("k", "fp", lease_s=5, ttl_s=5).outcome == "acquired"
    assert second.claim("k", "fp", lease_s=5, ttl_s=5).outcome == "acquired"


def test_a_client_passed_in_stays_open(client: redis.Redis, prefix: str) -> None:
    RedisStore(client, prefix=prefix).close()
    assert client.ping()


def test_bad_settings_are_refused(redis_server: RedisServer) -> None:
    text_client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    with pytest.raises(ConfigurationError, match="decode_responses"):
        RedisStore(text_client)
    text_client.close()
    with pytest.raises(ConfigurationError, match="not a redis URL"):
        RedisStore("http://127.0.0.1:1")
    with pytest.raises(ConfigurationError, match="prefix"):
        RedisStore(redis_server.url, prefix=None)  # type: ignore[arg-type]


def test_scripts_reload_after_the_server_forgets_them(client: redis.Redis, prefix: str) -> None:
    store = RedisStore(client, prefix=prefix)
    assert store.incr("n", ttl_s=60) == 1
    client.script_flush()
    assert store.incr("n", ttl_s=60) == 2


def test_an_unreachable_server_is_a_store_error_without_the_payload() -> None:
    with RedisServer() as server:
        url = server.url
    store = RedisStore(url)
    with pytest.raises(StoreError, match="redis complete failed: ConnectionError") as caught:
        store.complete("k", "token", b'{"api_key": "sk-live-123"}', ttl_s=60)
    assert "sk-live" not in str(caught.value)
    assert isinstance(caught.value.__cause__, redis.ConnectionError)
    store.close()


def test_a_command_to_a_stalled_server_fails_once_within_its_timeout(prefix: str) -> None:
    # redis-py retries ten times by default: a paused server would hold the call
    # for ten timeouts, and every retried script would run once the server wakes.
    with RedisServer() as server:
        store = RedisStore(server.url, prefix=prefix, timeout_s=0.2)
        assert store.incr("n", ttl_s=60) == 1
        server.pause()
        try:
            started = time.monotonic()
            with pytest.raises(StoreError, match="TimeoutError"):
                store.incr("n", ttl_s=60)
            elapsed = time.monotonic() - started
        finally:
            server.resume()
        assert elapsed < 1.0
        # The lost reply's increment ran at most once, whatever the server did with it.
        assert store.incr("n", ttl_s=60) in (2, 3)
        store.close()
