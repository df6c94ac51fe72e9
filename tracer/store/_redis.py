"""A store in Redis, shared by workers on many machines. Atomic operations only.

Every operation is one Lua script (EVALSHA, loaded on first use) or one command, so a
decision and its write never straddle two round trips. The caller's clock is passed
into the scripts, and the wall clocks of the machines sharing a store should agree to
well within a lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..._extras import install_hint
from ..._sql import load_statements
from .._errors import ConfigurationError
from . import _rules as rules
from ._base import CheckedStore, new_token
from ._protocol import Claim, ClaimOutcome, StoreError

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(f"RedisStore needs the redis client: {install_hint('redis')}") from exc

__all__ = ["RedisStore"]

_SCRIPTS = load_statements(__package__, "redis.lua")
# Redis drops a record this long after the store forgot it: slack for clock skew
# between workers, since the decisions use the timestamps inside the records.
_GC_MARGIN_S = 3600.0
_WITH_EPOCH = frozenset({"claim", "complete"})
_OUTCOMES: dict[bytes, ClaimOutcome] = {
    b"acquired": "acquired",
    b"replay": "replay",
    b"conflict": "conflict",
    b"in_progress": "in_progress",
    b"takeover": "takeover",
}


def _text(value: Any) -> str | None:
    return None if value is None else bytes(value).decode("utf-8")


class RedisStore(CheckedStore):
    """`IdempotencyStore` in Redis under keys starting with ``prefix``.

    ``url_or_client`` is a ``redis://`` URL (the store owns that connection pool and
    closes it) or a ``redis.Redis`` client (left open on `close`). The client must
    return bytes: stored results are bytes, not text. ``timeout_s`` bounds each
    connect and command of a URL-made client, so an unreachable server fails the
    call (``StoreError``: writes fail closed, reads run unguarded) instead of hanging.
    A URL-made client never retries a command on its own, and a client of your own
    should not either: ``redis.Redis(host=...)`` retries ten times by default, which
    stretches ``timeout_s`` tenfold and re-sends a script whose reply was lost (a
    claim then meets itself as ``in_progress``, a counter counts twice). Build it
    with ``retry=Retry(NoBackoff(), 0)``; the executor's result is retryable instead.
    """

    def __init__(
        self,
        url_or_client: str | redis.Redis,
        *,
        prefix: str = "toolspan:",
        clock: Callable[[], float] = time.time,
        timeout_s: float = 2.0,
    ) -> None:
        super().__init__(clock)
        if not isinstance(prefix, str):
            raise ConfigurationError(f"prefix must be a string, got {type(prefix).__name__}")
        self._prefix = prefix
        if isinstance(url_or_client, str):
            try:
                self._client = redis.Redis.from_url(
                    url_or_client,
                    socket_timeout=timeout_s,
                    socket_connect_timeout=timeout_s,
                    retry=Retry(NoBackoff(), 0),
                )
            except ValueError as exc:
                raise ConfigurationError(f"not a redis URL: {exc}") from exc
            self._owns_client = True
        elif isinstance(url_or_client, redis.Redis):
            self._client = url_or_client
            self._owns_client = False
        else:
            raise ConfigurationError(
                f"RedisStore takes a redis:// URL or a redis.Redis client, "
                f"got {type(url_or_client).__name__}"
            )
        if self._client.connection_pool.connection_kwargs.get("decode_responses"):
            raise ConfigurationError("RedisStore needs a client with decode_responses=False")
        # `claim` and `complete` check the epoch marker in the same script (loss detection).
        prelude = _SCRIPTS["epoch"]
        self._scripts = {
            name: self._client.register_script(prelude + src if name in _WITH_EPOCH else src)
            for name, src in _SCRIPTS.items()
            if name != "epoch"
        }
        self._closed = False

    def _record_key(self, key: str) -> str:
        return f"{self._prefix}idem:{key}"

    def _guard_key(self, name: str) -> str:
        return f"{self._prefix}guard:{name}"

    @contextmanager
    def _mapped(self, operation: str) -> Iterator[None]:
        if self._closed:
            raise StoreError("the Redis store is closed")
        try:
            yield
        except redis.RedisError as exc:
            raise StoreError(f"redis {operation} failed: {type(exc).__name__}: {exc}") from exc

    def _script(self, name: str, key: str, *args: str | float | bytes) -> Any:
        with self._mapped(name):
            keys = [key, f"{self._prefix}epoch"] if name in _WITH_EPOCH else [key]
            return self._scripts[name](keys=keys, args=list(args))

    def _epoch_args(self) -> tuple[str, str]:
        known = self._known_epoch
        return ("" if known is None else known.encode()), new_token()

    def _claim(self, key: str, fingerprint: str, lease_s: float, ttl_s: float) -> Claim:
        outcome, token, result, stored_fp, epoch, found, suspect, newborn, age = self._script(
            "claim",
            self._record_key(key),
            fingerprint,
            self._clock(),
            lease_s,
            ttl_s,
            new_token(),
            _GC_MARGIN_S,
            *self._epoch_args(),
            rules.NEWBORN_GRACE_S,
        )
        self._saw_epoch(rules.Epoch.decode(str(_text(epoch))), bool(found))
        return Claim(
            outcome=_OUTCOMES[bytes(outcome)],
            token=_text(token),
            result=None if result is None else bytes(result),
            fingerprint=_text(stored_fp),
            store_lost=bool(suspect),
            store_new=bool(newborn),
            suspect_for_s=None if age is None else float(bytes(age)),
        )

    def _complete(self, key: str, token: str, result: bytes, ttl_s: float) -> bool:
        args = (token, result, self._clock(), ttl_s, _GC_MARGIN_S, *self._epoch_args())
        stored, epoch, found = self._script("complete", self._record_key(key), *args)
        self._saw_epoch(rules.Epoch.decode(str(_text(epoch))), bool(found))
        return bool(stored)

    def _release(self, key: str, token: str) -> None:
        self._script("release", self._record_key(key), token, self._clock())

    def _lapse(self, key: str, token: str) -> None:
        self._extend(key, token, 0.0)  # a lease renewed to end now

    def _extend(self, key: str, token: str, lease_s: float) -> bool:
        args = (token, self._clock(), lease_s, _GC_MARGIN_S)
        return bool(self._script("extend", self._record_key(key), *args))

    def _guard_write(
        self, name: str, kind: rules.GuardKind, operation: str, operand: str, ttl_s: float
    ) -> int:
        status, detail = self._script(
            "guard_write",
            self._guard_key(name),
            kind,
            operation,
            operand,
            self._clock(),
            ttl_s,
            _GC_MARGIN_S,
        )
        if status != b"ok":
            raise rules.kind_mismatch(name, str(_text(detail)), kind)
        return int(detail)

    def _guard_read(self, name: str, kind: rules.GuardKind) -> tuple[str, int] | None:
        stored = self._script("guard_read", self._guard_key(name), self._clock())
        if stored is None:
            return None
        stored_kind, text, count = stored
        if stored_kind != kind.encode():
            raise rules.kind_mismatch(name, str(_text(stored_kind)), kind)
        return str(_text(text)), int(count)

    def _incr(self, name: str, by: int, ttl_s: float) -> int:
        return self._guard_write(name, "counter", "incr", str(by), ttl_s)

    def _record_answer(self, name: str, answer: str, ttl_s: float) -> int:
        return self._guard_write(name, "answer", "answer", answer, ttl_s)

    def _answer_count(self, name: str) -> tuple[str, int] | None:
        return self._guard_read(name, "answer")

    def _put(self, name: str, value: str, ttl_s: float) -> None:
        self._guard_write(name, "value", "put", value, ttl_s)

    def _get(self, name: str) -> str | None:
        stored = self._guard_read(name, "value")
        return None if stored is None else stored[0]

    def _delete(self, name: str) -> None:
        with self._mapped("delete"):
            self._client.delete(self._guard_key(name))

    def close(self) -> None:
        if self._owns_client and not self._closed:
            with self._mapped("close"):
                self._client.close()
        self._closed = True
