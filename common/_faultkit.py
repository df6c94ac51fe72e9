"""The :class:`FaultKit`: one fake clock, effect ledger and fault plan for a test."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from toolspan.tracer import AttemptEvent, CallEvent, ToolResult
from toolspan.tracer.testing import FakeClock

from ._faults import EffectLedger, Fault, FaultInjector, FaultPlan, wrap_callable

__all__ = ["FaultKit"]

R = TypeVar("R")


class ResultHook:
    """An executor hook keeping every final result, for adapters that answer in their own types."""

    def __init__(self, results: list[ToolResult]) -> None:
        self.results = results

    def on_attempt(self, event: AttemptEvent) -> None:
        del event  # attempts are in the result already

    def on_call(self, event: CallEvent) -> None:
        self.results.append(event.result)


class FaultKit:
    """A fake clock, an effect ledger and one fault plan, shared by every transport.

    ``faults`` are the faults of the first requests in order (``then`` after
    them, ``Fault.ok()`` by default); ``applies_to(request)`` limits them to
    some requests (e.g. ``lambda r: r.method == "POST"``; for a wrapped
    function the request is its ``(args, kwargs)``), the others pass.
    ``wall`` is the wall clock HTTP-dates are written against (the client
    reads ``Retry-After`` dates against the real time, as
    :func:`~toolspan.tracer.raise_for_httpx_status` does).
    """

    def __init__(
        self,
        faults: Iterable[Fault] = (),
        *,
        then: Fault | None = None,
        applies_to: Callable[[Any], bool] | None = None,
        clock: FakeClock | None = None,
        seed: int = 0,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock if clock is not None else FakeClock()
        self.ledger = EffectLedger()
        self.seed = seed
        plan = FaultPlan(tuple(faults), then or Fault.ok(), applies_to)
        self.injector = FaultInjector(plan, self.ledger, self.clock, wall=wall)
        #: Every final result of an executor built with ``hooks=[kit.hook]``.
        self.results: list[ToolResult] = []
        self.hook = ResultHook(self.results)

    @property
    def plan(self) -> FaultPlan:
        """The fault plan every transport of this kit draws from."""
        return self.injector.plan

    def script(self, *faults: Fault, then: Fault | None = None) -> None:
        """Replace the plan: ``faults`` for the next requests, then ``then``."""
        self.injector.plan = FaultPlan(faults, then or Fault.ok(), self.plan.applies_to)

    @property
    def log(self) -> list[tuple[str, str]]:
        """Every request the kit saw, with the fault it got: ``("POST /refunds", "ok")``."""
        return self.injector.log

    def httpx_transport(self, service: Callable[[Any], Any]) -> Any:
        """An ``httpx.MockTransport`` (sync and async) that runs ``service`` behind the faults.

        ``service(request) -> httpx.Response`` is the fake of the remote API.
        """
        from ._fault_http import fault_transport

        return fault_transport("httpx", service, self.injector)

    def httpx2_transport(self, service: Callable[[Any], Any]) -> Any:
        """:meth:`httpx_transport` for httpx2 (``service`` answers ``httpx2.Response``)."""
        from ._fault_http import fault_transport

        return fault_transport("httpx2", service, self.injector)

    def wrap(self, fn: Callable[..., R], name: str | None = None) -> Callable[..., R]:
        """``fn`` taken as the service itself, behind the faults (no HTTP at all).

        A status raises ``ToolError`` (with ``retry_after_s``), a timeout
        ``TimeoutError``, a reset or lost response a ``ConnectionError``.
        """
        return wrap_callable(fn, self.injector, name)

    def executor_options(self, *, asynchronous: bool = False) -> dict[str, Any]:
        """``sleep``, ``clock``, ``rng`` and ``span_clock`` for an executor on the kit's time.

        ``asynchronous=True`` gives the awaitable sleep an ``AsyncExecutor`` takes.
        """
        return {
            "sleep": self.clock.async_sleep if asynchronous else self.clock.sleep,
            "clock": self.clock,
            "rng": random.Random(self.seed),
            "span_clock": self.clock.time_ns,
        }

    def settle(self) -> int:
        """Land every late commit (the clock moves past them); how many landed."""
        return self.ledger.settle(self.clock)
