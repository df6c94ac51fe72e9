"""Scripted faults, the effect ledger, and the injector that applies them.

Everything here is transport-agnostic and deterministic: the injector asks a
``call_service`` callable to run the fake service (which records what really
happened in the :class:`EffectLedger`) and decides, per request, whether the
client sees the answer, a status with ``Retry-After``, a timeout after the
service committed, a lost response, a reset, or a timeout whose commit lands
later on the injected clock. The httpx/httpx2 transports (``_fault_http``)
and the plain-callable wrapper are thin shells over :class:`FaultInjector`.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any, Literal, TypeVar

from toolspan.tracer import ToolError
from toolspan.tracer.testing import FakeClock

__all__ = ["EffectLedger", "Fault", "FaultInjector", "FaultKind", "FaultPlan"]

FaultKind = Literal[
    "ok",
    "slow",
    "status",
    "connection_reset",
    "timeout_after_commit",
    "response_lost",
    "late_commit",
]
# The faults after which the service has done (or will do) the work anyway.
_COMMITTING: frozenset[str] = frozenset(
    {"ok", "slow", "timeout_after_commit", "response_lost", "late_commit"}
)

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Fault:
    """What one request to the fake service suffers. Build with the class methods."""

    kind: FaultKind = "ok"
    status: int = 0
    retry_after_s: float | None = None
    http_date: bool = False  # send Retry-After as an HTTP-date instead of seconds
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.delay_s < 0 or not math.isfinite(self.delay_s):
            raise ValueError(f"a fault's delay must be a finite number >= 0, got {self.delay_s!r}")
        if self.kind == "status" and not 400 <= self.status <= 599:
            raise ValueError(f"a status fault needs a 4xx/5xx status, got {self.status!r}")
        if self.retry_after_s is not None and (
            self.retry_after_s < 0 or not math.isfinite(self.retry_after_s)
        ):
            raise ValueError(f"Retry-After must be >= 0 seconds, got {self.retry_after_s!r}")

    @classmethod
    def ok(cls) -> Fault:
        """The service answers normally."""
        return cls()

    @classmethod
    def slow(cls, seconds: float) -> Fault:
        """The service answers after ``seconds`` on the injected clock."""
        return cls("slow", delay_s=seconds)

    @classmethod
    def http_status(
        cls, status: int, *, retry_after_s: float | None = None, http_date: bool = False
    ) -> Fault:
        """An error status (e.g. 408, 429, 503), with ``Retry-After`` in seconds or as a date.

        The service does nothing: a status means the request was refused.
        """
        return cls("status", status=status, retry_after_s=retry_after_s, http_date=http_date)

    @classmethod
    def connection_reset(cls) -> Fault:
        """The connection is reset before the request reaches the service."""
        return cls("connection_reset")

    @classmethod
    def timeout_after_commit(cls) -> Fault:
        """The service commits, then the client times out waiting for the answer."""
        return cls("timeout_after_commit")

    @classmethod
    def response_lost(cls) -> Fault:
        """The service commits, then the connection drops before the response."""
        return cls("response_lost")

    @classmethod
    def late_commit(cls, after_s: float = 0.5) -> Fault:
        """The client times out at once; the service commits ``after_s`` later."""
        return cls("late_commit", delay_s=after_s)

    @property
    def commits(self) -> bool:
        """Whether the service does the work (now or later) under this fault."""
        return self.kind in _COMMITTING

    @property
    def label(self) -> str:
        """A short name for tables and logs."""
        if self.kind == "status":
            if self.retry_after_s is None:
                return f"http {self.status}"
            form = "date" if self.http_date else "s"
            return f"http {self.status} Retry-After {self.retry_after_s:g} {form}"
        if self.kind in ("slow", "late_commit"):
            return f"{self.kind.replace('_', ' ')} {self.delay_s:g} s"
        return self.kind.replace("_", " ")


@dataclass
class FaultPlan:
    """The faults of successive requests; once used up, every request gets ``then``.

    ``applies_to`` picks the requests the plan counts (e.g. only writes); the
    others always get ``Fault.ok()``.
    """

    faults: Sequence[Fault] = ()
    then: Fault = field(default_factory=Fault.ok)
    applies_to: Callable[[Any], bool] | None = None
    _used: int = 0

    def next_for(self, request: Any) -> Fault:
        """The fault of ``request`` (and move on, if the plan counts it)."""
        if self.applies_to is not None and not self.applies_to(request):
            return Fault.ok()
        fault = self.faults[self._used] if self._used < len(self.faults) else self.then
        self._used += 1
        return fault


@dataclass(order=True)
class _Pending:
    due: float
    seq: int
    land: Callable[[], object] = field(compare=False)


class EffectLedger:
    """What really happened at the fake service: effects, keys, late commits.

    The fake service calls :meth:`commit` for every side effect it performs.
    With ``key`` it behaves as a service that honours idempotency keys: a key
    it has seen commits nothing new (and is counted as a replay). Late commits
    wait in the ledger until the clock reaches them (:meth:`land_due`,
    :meth:`settle`), so a read-back in between really finds nothing.
    """

    def __init__(self) -> None:
        self.effects: Counter[tuple[str, str]] = Counter()
        self.replays = 0
        self.requests = 0
        self._keys: dict[str, tuple[str, str]] = {}
        self._pending: list[_Pending] = []
        self._seq = 0

    def commit(self, effect: str, resource: str = "", *, key: str | None = None) -> bool:
        """Record one side effect; False when ``key`` was seen (a replay, no new effect)."""
        if key is not None:
            if key in self._keys:
                self.replays += 1
                return False
            self._keys[key] = (effect, resource)
        self.effects[(effect, resource)] += 1
        return True

    def count(self, effect: str | None = None, resource: str | None = None) -> int:
        """How many effects happened, of ``effect`` on ``resource`` (None: any)."""
        return sum(
            n
            for (kind, where), n in self.effects.items()
            if (effect is None or kind == effect) and (resource is None or where == resource)
        )

    def max_per_resource(self) -> int:
        """The most effects of one kind on one resource (2 or more: a double effect)."""
        return max(self.effects.values(), default=0)

    @property
    def pending(self) -> int:
        """Late commits that have not landed yet."""
        return len(self._pending)

    def defer(self, due: float, land: Callable[[], object]) -> None:
        """Run ``land`` (the service finishing the request) once the clock reaches ``due``."""
        self._seq += 1
        heapq.heappush(self._pending, _Pending(due, self._seq, land))

    def land_due(self, now: float) -> int:
        """Land every late commit due by ``now``; how many landed."""
        landed = 0
        while self._pending and self._pending[0].due <= now:
            heapq.heappop(self._pending).land()
            landed += 1
        return landed

    def settle(self, clock: FakeClock) -> int:
        """Move ``clock`` past the last late commit and land them all (end of a test)."""
        if self._pending:
            last = max(pending.due for pending in self._pending)
            clock.advance(max(0.0, last - clock()))
        return self.land_due(clock())

    def __iter__(self) -> Iterator[tuple[tuple[str, str], int]]:
        return iter(sorted(self.effects.items()))


@dataclass(frozen=True)
class Failures:
    """How one client library spells each failure (built per transport)."""

    timeout: Callable[[str], BaseException]
    reset: Callable[[str], BaseException]
    lost: Callable[[str], BaseException]


def retry_after_value(fault: Fault, wall: Callable[[], float]) -> str | None:
    """The ``Retry-After`` header a status fault sends (an HTTP-date rounds up)."""
    if fault.retry_after_s is None:
        return None
    if not fault.http_date:
        return f"{fault.retry_after_s:g}"
    # HTTP-dates have whole seconds: round up so the client never waits less.
    when = datetime.fromtimestamp(math.ceil(wall() + fault.retry_after_s), UTC)
    return format_datetime(when, usegmt=True)


class FaultInjector:
    """Applies a :class:`FaultPlan` to each request, on the injected clock."""

    def __init__(
        self,
        plan: FaultPlan,
        ledger: EffectLedger,
        clock: FakeClock,
        *,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.plan = plan
        self.ledger = ledger
        self.clock = clock
        self.wall = wall  # for HTTP-dates: what the client compares them with
        self.log: list[tuple[str, str]] = []  # (request, fault label), in order

    def handle(
        self,
        request: Any,
        describe: str,
        call_service: Callable[[], R],
        refuse: Callable[[Fault], R],
        failures: Failures,
    ) -> R:
        """Run one request through its fault: the answer, a refusal, or a failure."""
        self.ledger.land_due(self.clock())
        fault = self.plan.next_for(request)
        self.log.append((describe, fault.label))
        self.ledger.requests += 1
        if fault.kind == "status":
            return refuse(fault)
        if fault.kind == "connection_reset":
            raise failures.reset(f"connection reset by peer ({describe})")
        if fault.kind == "late_commit":
            self.ledger.defer(self.clock() + fault.delay_s, call_service)
            raise failures.timeout(f"timed out; the service commits {fault.delay_s:g} s later")
        if fault.kind == "slow":
            self.clock.advance(fault.delay_s)
        answer = call_service()
        if fault.kind == "timeout_after_commit":
            raise failures.timeout(f"timed out after the service committed ({describe})")
        if fault.kind == "response_lost":
            raise failures.lost(f"server disconnected without sending a response ({describe})")
        return answer


def _callable_failures() -> Failures:
    return Failures(
        timeout=lambda message: TimeoutError(message),
        reset=lambda message: ConnectionResetError(message),
        lost=lambda message: ConnectionAbortedError(message),
    )


def wrap_callable(
    fn: Callable[..., R], injector: FaultInjector, name: str | None = None
) -> Callable[..., R]:
    """``fn`` taken as the service itself, behind ``injector``'s faults.

    A status fault raises :class:`~toolspan.tracer.ToolError` with its
    ``Retry-After`` (an HTTP-date is sent as the seconds it stands for);
    failures are the built-in ``TimeoutError`` and ``ConnectionError`` kinds.
    The signature is kept (``functools.wraps``), so a tool declared on the
    wrapper still receives its ``idempotency_key``.
    """
    import functools

    label = name or str(getattr(fn, "__name__", "call"))
    failures = _callable_failures()

    def refuse(fault: Fault) -> R:
        raise ToolError.from_status(
            fault.status,
            f"{label}: HTTP {fault.status} (injected)",
            retry_after_s=fault.retry_after_s,
        )

    @functools.wraps(fn)
    def faulty(*args: Any, **kwargs: Any) -> R:
        return injector.handle((args, kwargs), label, lambda: fn(*args, **kwargs), refuse, failures)

    return faulty
