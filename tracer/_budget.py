"""A retry budget shared by every process that uses the same store: retries stay a
bounded share of normal traffic, so an outage never gets N times the load.

The rule (Finagle's and Envoy's retry budgets, gRPC's retry throttling): a retry to a
service is allowed only if, counting it, the retries in the ``window_s`` ending now do
not exceed ``ratio`` x the first attempts in that window + ``min_retries_per_s`` x
``window_s``. First attempts are never refused; a refused retry is not made and the
call ends with status ``retry_budget``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from opentelemetry.metrics import MeterProvider

from ._fleetcheck import SERVICE, check_number, meter, resolve_store
from ._redact import redacted_error
from .store import IdempotencyStore, StoreError
from .store._fleet import BudgetVerdict

__all__ = ["RetryBudget"]

_log = logging.getLogger("toolspan.tracer")


class RetryBudget:
    """Bound automatic retries per downstream service, across a fleet.

    ``store`` is the same kind of object `Safeguards` takes (a ``MemoryStore`` when
    omitted: one process); processes sharing a store and a service name share the
    budget. Windows are measured on the store's clock (the Redis server's ``TIME`` for
    a ``RedisStore``), or on ``clock`` when given (tests). A failing store fails open:
    the retry goes ahead and the call span says so (availability over protection).

    >>> budget = RetryBudget(store=RedisStore("redis://redis:6379/0"))  # doctest: +SKIP
    >>> executor = Executor(tools, retry_budget=budget)
    """

    __slots__ = (
        "_clock", "_exhausted", "_lock", "_refused", "_state",
        "min_retries_per_s", "ratio", "store", "window_s",
    )  # fmt: skip

    def __init__(
        self,
        ratio: float = 0.2,
        min_retries_per_s: float = 10.0,
        window_s: float = 10.0,
        store: IdempotencyStore | None = None,
        *,
        clock: Callable[[], float] | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.ratio = check_number("RetryBudget", "ratio", ratio, positive=False)
        self.min_retries_per_s = check_number(
            "RetryBudget", "min_retries_per_s", min_retries_per_s, positive=False
        )
        self.window_s = check_number("RetryBudget", "window_s", window_s, positive=True)
        self.store, self._state = resolve_store("RetryBudget", store)
        self._clock = clock
        self._refused = meter(meter_provider).create_counter(
            "toolspan.retry.budget.refused",
            unit="{retry}",
            description="Retries the retry budget did not allow",
        )
        # Services whose budget refused the last retry here: log the change, not each one.
        self._exhausted: set[str] = set()
        self._lock = threading.Lock()

    def record_first_attempt(self, service: str) -> float | None:
        """Count a first attempt to ``service`` (never refused): the instant it was
        counted at on the store's clock, or None when the store failed (not counted)."""
        try:
            return self._state.budget_first(service, self.window_s, self._clock)
        except StoreError as exc:
            _log.warning(
                "retry budget of %r: store failed, not counted: %s", service, redacted_error(exc)
            )
            return None

    def allow_retry(self, service: str) -> BudgetVerdict:
        """Allow (and count) one retry to ``service``, or refuse it."""
        try:
            verdict = self._state.budget_retry(
                service, self.ratio, self.min_retries_per_s, self.window_s, self._clock
            )
        except StoreError as exc:
            _log.warning(
                "retry budget of %r: store failed, retry allowed: %s", service, redacted_error(exc)
            )
            return BudgetVerdict(True, 0.0, 0, 0, 0.0, failed_open=True)
        self._note(service, verdict)
        return verdict

    def _note(self, service: str, verdict: BudgetVerdict) -> None:
        if not verdict.allowed:
            self._refused.add(1, {SERVICE: service})
        with self._lock:
            if (service in self._exhausted) != verdict.allowed:
                return  # no change
            if verdict.allowed:
                self._exhausted.discard(service)
            else:
                self._exhausted.add(service)
        if verdict.allowed:
            _log.info("retry budget of %r: retries allowed again", service)
        else:
            _log.warning(
                "retry budget of %r exhausted: %d retries in the last %gs, limit %.1f "
                "(%d first attempts)",
                service, verdict.retries, self.window_s, verdict.limit, verdict.first_attempts,
            )  # fmt: skip

    def __repr__(self) -> str:
        return (
            f"RetryBudget(ratio={self.ratio!r}, min_retries_per_s={self.min_retries_per_s!r}, "
            f"window_s={self.window_s!r}, store={type(self.store).__name__})"
        )
