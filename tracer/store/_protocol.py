"""The idempotency store interface shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from .._errors import StoreError

__all__ = ["Claim", "ClaimOutcome", "IdempotencyStore", "StoreError"]

ClaimOutcome = Literal["acquired", "replay", "conflict", "in_progress", "takeover"]


@dataclass(frozen=True)
class Claim:
    """What `IdempotencyStore.claim` decided for one key.

    - ``acquired``: nobody holds the key; the caller owns it with ``token`` and executes.
    - ``takeover``: the previous owner's lease ran out (its worker probably died) and the
      caller now owns the key with a fresh ``token``. The earlier attempt's outcome is
      unknown: read the effect back before executing.
    - ``replay``: the action already succeeded with these arguments; ``result`` holds it.
    - ``conflict``: the key was used with other arguments (``fingerprint`` holds theirs).
    - ``in_progress``: another live owner is executing this action right now.

    ``store_lost`` (with ``acquired`` only): the store lost data recently (it restarted
    empty, was flushed, fell behind what a client had seen, or is another file) and
    holds no record of the key, which may have completed before the loss. Read the
    effect back before executing. See "loss detection" in ``_rules``.

    ``store_new`` (with ``acquired`` only): the store's marker was written moments ago
    by a client that had never seen the store. A Redis that restarted empty looks new
    until a client that used it before notices; until then a key it cannot find may
    have completed. Read the effect back before executing, if the tool can.

    ``suspect_for_s`` (with ``store_lost`` or ``store_new``): how long ago, on the
    store's clock, the store may have forgotten the key (the loss was seen, or the
    marker written). A request for the key sent before then may still be in flight.
    """

    outcome: ClaimOutcome
    token: str | None
    result: bytes | None
    fingerprint: str | None
    store_lost: bool = False
    store_new: bool = False
    suspect_for_s: float | None = None

    @property
    def owned(self) -> bool:
        """True when the caller now owns the key and must `complete` or `release` it."""
        return self.token is not None


@runtime_checkable
class IdempotencyStore(Protocol):
    """Per-key claim records for idempotent writes plus small atomic guard state.

    Every operation is atomic on its own, across threads, processes and (for Redis)
    machines. Times come from the store's injected wall clock.

    Claim rules, with ``now`` from the store's clock:

    ===========================================  ================================
    record under the key                         outcome
    ===========================================  ================================
    none, or forgotten (TTL passed)              ``acquired`` (in flight, lease until
                                                 ``now + lease_s``)
    any record with another fingerprint          ``conflict``
    completed, same fingerprint                  ``replay`` with the stored result
    in flight, same fingerprint, lease running   ``in_progress``
    in flight, same fingerprint, lease over      ``takeover`` (fresh token and lease)
    ===========================================  ================================

    A completed record is forgotten ``ttl_s`` after `complete`; an abandoned in-flight
    record ``ttl_s`` after its lease ran out (until then it answers ``takeover``, so
    the unknown outcome of a dead worker is never silently dropped). `lapse` ends a
    live owner's lease at once, for the same reason.

    Guard state (``incr``, ``record_answer``, ``put``) lives in its own namespace: a
    name holds one kind of state, and every write sets its expiry to ``now + ttl_s``.
    Using a name with another kind raises `StoreError`.
    """

    def claim(self, key: str, fingerprint: str, *, lease_s: float, ttl_s: float) -> Claim:
        """Atomically decide who may execute the action behind ``key`` (see the table)."""
        ...

    def complete(self, key: str, token: str, result: bytes, *, ttl_s: float) -> bool:
        """Store ``result`` for ``ttl_s`` if ``token`` still owns ``key``; False if not."""
        ...

    def release(self, key: str, token: str) -> None:
        """Forget the in-flight record if ``token`` owns it: failures are not stored."""
        ...

    def extend(self, key: str, token: str, *, lease_s: float) -> bool:
        """Renew the lease to ``now + lease_s`` while a slow call runs; False if not owner."""
        ...

    def lapse(self, key: str, token: str) -> None:
        """End the lease now but keep the in-flight record if ``token`` owns it.

        For a write whose outcome is unknown: the next claim with the same arguments
        is a ``takeover`` (read back first), one with other arguments a ``conflict``,
        as for a worker that died holding the key."""
        ...

    def incr(self, name: str, *, ttl_s: float, by: int = 1) -> int:
        """Add ``by`` to the counter ``name`` (missing counts as 0); return the new value."""
        ...

    def record_answer(self, name: str, answer: str, *, ttl_s: float) -> int:
        """Record ``answer``; return how many times in a row it was recorded under ``name``."""
        ...

    def answer_count(self, name: str) -> tuple[str, int] | None:
        """The last answer recorded under ``name`` and its consecutive count."""
        ...

    def put(self, name: str, value: str, *, ttl_s: float) -> None:
        """Set the value ``name``."""
        ...

    def get(self, name: str) -> str | None:
        """The value ``name``, or None when unset or expired."""
        ...

    def delete(self, name: str) -> None:
        """Forget the guard state ``name``, whatever its kind."""
        ...

    def close(self) -> None:
        """Release connections the store opened. The store is unusable afterwards."""
        ...
