"""A circuit breaker shared by every process that uses the same store.

Per downstream service: **closed** until, over the last ``window_s``, at least
``min_calls`` calls have completed and the share of them that ended in a retryable
failure reaches ``failure_ratio``; then **open** for ``open_s`` (jittered down by up to
10%, so breakers opened together do not probe together), refusing every call with
status ``circuit_open``; then **half-open**: at most ``half_open_calls`` probes at once,
fleet-wide. The first probe to report decides: a success closes the breaker, a
retryable failure opens it again. A "call" here is one attempt that reached the tool.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.metrics import MeterProvider

from ._errors import ConfigurationError
from ._fleetcheck import SERVICE, check_at_least, check_number, meter, resolve_store
from ._redact import redacted_error
from .store import IdempotencyStore, StoreError
from .store._fleet import Admission, BreakerSettings, CircuitState

__all__ = ["CircuitBreaker", "Transition"]

_log = logging.getLogger("toolspan.tracer")

# open_s is shortened by a random share up to this, never lengthened: traffic is back
# within open_s (plus one probe) after the service recovers.
OPEN_JITTER = 0.1
# Probe tokens: unique per process (pid, in case of fork) and per admission.
_PROCESS = secrets.token_hex(4)
_COUNTER = itertools.count()


@dataclass(frozen=True, slots=True)
class Transition:
    """The breaker of ``service`` went from ``before`` to ``after`` at ``at`` (store clock)."""

    service: str
    before: CircuitState
    after: CircuitState
    at: float


class CircuitBreaker:
    """Fail fast while a downstream service is failing, across a fleet.

    ``store`` is the same kind of object `Safeguards` takes (a ``MemoryStore`` when
    omitted); processes sharing a store and a service name share the breaker. Windows
    and open periods are measured on the store's clock (the Redis server's ``TIME``
    for a ``RedisStore``) or on ``clock`` when given. ``rng`` draws the jitter. A
    failing store fails open: the call goes ahead and its span says so.

    A half-open probe that never reports (its worker died) frees its slot after
    ``open_s``.
    """

    __slots__ = (
        "_clock", "_rng", "_settings", "_state", "_transitions",
        "failure_ratio", "half_open_calls", "min_calls", "open_s", "store", "window_s",
    )  # fmt: skip

    def __init__(
        self,
        failure_ratio: float = 0.5,
        min_calls: int = 20,
        window_s: float = 30.0,
        open_s: float = 15.0,
        half_open_calls: int = 1,
        store: IdempotencyStore | None = None,
        *,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        owner = "CircuitBreaker"
        self.failure_ratio = check_number(owner, "failure_ratio", failure_ratio, positive=True)
        if self.failure_ratio > 1:
            raise ConfigurationError(
                f"{owner}: failure_ratio must be at most 1, got {failure_ratio!r}"
            )
        self.min_calls = check_at_least(owner, "min_calls", min_calls, 1)
        self.window_s = check_number(owner, "window_s", window_s, positive=True)
        self.open_s = check_number(owner, "open_s", open_s, positive=True)
        self.half_open_calls = check_at_least(owner, "half_open_calls", half_open_calls, 1)
        self.store, self._state = resolve_store(owner, store)
        self._settings = BreakerSettings(
            self.failure_ratio,
            self.min_calls,
            self.window_s,
            self.half_open_calls,
            probe_lease_s=self.open_s,
            open_s=self.open_s,
        )
        self._clock = clock
        self._rng = rng or random.Random()
        self._transitions = meter(meter_provider).create_counter(
            "toolspan.circuit.transitions",
            unit="{transition}",
            description="Circuit breaker state changes",
        )

    def admit(self, service: str) -> tuple[Admission, Transition | None]:
        """May a call to ``service`` go ahead now? Also the state change it caused."""
        token = f"{_PROCESS}:{os.getpid()}:{next(_COUNTER)}"
        try:
            admission = self._state.breaker_admit(service, self._settings, token, self._clock)
        except StoreError as exc:
            _log.warning(
                "circuit breaker of %r: store failed, call admitted: %s",
                service,
                redacted_error(exc),
            )
            return Admission(True, "closed", 0.0, failed_open=True), None
        if not admission.opened_half:
            return admission, None
        return admission, self._changed(service, "open", "half_open", admission.at)

    def record(self, service: str, admission: Admission, *, failed: bool) -> Transition | None:
        """Record how an admitted call ended (``failed``: a retryable failure)."""
        if admission.failed_open:
            return None
        open_for_s = self.open_s * (1.0 - OPEN_JITTER * self._rng.random())
        try:
            recorded = self._state.breaker_record(
                service, self._settings, admission.probe, failed, open_for_s, self._clock
            )
        except StoreError as exc:
            _log.warning(
                "circuit breaker of %r: store failed, outcome lost: %s",
                service,
                redacted_error(exc),
            )
            return None
        if not recorded.changed:
            return None
        return self._changed(service, recorded.before, recorded.after, recorded.at)

    def release(self, service: str, admission: Admission) -> None:
        """An admitted call ended without an outcome for the service: free its probe slot."""
        if admission.probe is None:
            return
        try:
            self._state.breaker_release(service, admission.probe)
        except StoreError as exc:
            _log.warning(
                "circuit breaker of %r: store failed, probe slot kept: %s",
                service,
                redacted_error(exc),
            )

    def _changed(
        self, service: str, before: CircuitState, after: CircuitState, at: float
    ) -> Transition:
        self._transitions.add(
            1, {SERVICE: service, "toolspan.circuit.from": before, "toolspan.circuit.to": after}
        )
        log = _log.warning if after == "open" else _log.info
        log("circuit breaker of %r: %s -> %s", service, before, after)
        return Transition(service, before, after, at)

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker(failure_ratio={self.failure_ratio!r}, min_calls={self.min_calls!r}, "
            f"window_s={self.window_s!r}, open_s={self.open_s!r}, "
            f"half_open_calls={self.half_open_calls!r}, store={type(self.store).__name__})"
        )
