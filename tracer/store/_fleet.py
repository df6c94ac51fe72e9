"""Fleet state: the sliding windows of retry budgets and circuit breakers, in a store.

`RetryBudget` and `CircuitBreaker` (``toolspan.tracer``) are strategy objects; the
counting lives here, next to the idempotency records, in the backend of the store they
were given. Processes sharing a store and a service name share one budget and one
breaker. Every operation below is one atomic check-and-record (a lock, one
``BEGIN IMMEDIATE`` transaction, one Lua script), decided on the store's clock: the
Redis server's ``TIME`` for a fleet, the store's clock for one host or one process.

Windows are exact: every event is kept with its instant for ``window_s``, and a window
ending at ``now`` holds the events with ``now - window_s < at <= now``.

Breaker states: ``closed`` (calls pass; completions are counted), ``open`` (calls are
refused until ``open_until``), ``half_open`` (the first admission after ``open_until``
switches to it; at most ``half_open_calls`` probes hold a slot at once, each for at most
``probe_lease_s``; the first probe to report decides: success closes, failure reopens).
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .._errors import ConfigurationError
from ._protocol import StoreError

__all__ = [
    "Admission",
    "BreakerSettings",
    "BudgetVerdict",
    "CircuitState",
    "FleetState",
    "Recorded",
    "corrupt_state",
    "fleet_state",
]

_log = logging.getLogger("toolspan.store")

CircuitState = Literal["closed", "open", "half_open"]
Clock = Callable[[], float] | None


@dataclass(frozen=True, slots=True)
class BudgetVerdict:
    """One retry-budget check: may this retry go ahead, and the window it was judged on.

    ``retries`` counts the retries in the window, this one included when allowed;
    ``limit`` is ``ratio * first_attempts + min_retries_per_s * window_s``.
    """

    allowed: bool
    at: float
    retries: int
    first_attempts: int
    limit: float
    failed_open: bool = False  # the store failed: allowed unchecked


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    failure_ratio: float
    min_calls: int
    window_s: float
    half_open_calls: int
    probe_lease_s: float
    # The longest an open period lasts: an ``open_until`` further ahead than this
    # (the clock stepped back, or the stored state is corrupt) ends now.
    open_s: float = math.inf

    def still_open(self, now: float, open_until: float) -> bool:
        """Whether a breaker open until ``open_until`` refuses calls at ``now``."""
        return now < open_until <= now + self.open_s

    def live_probe(self, now: float, until: float) -> bool:
        """Whether a probe slot leased until ``until`` is still held at ``now``."""
        return now < until <= now + self.probe_lease_s


@dataclass(frozen=True, slots=True)
class Admission:
    """May a call go to the service now? ``state`` is the breaker's after deciding.

    ``probe`` is the slot token of a half-open probe (report it with ``breaker_record``
    or give it back with ``breaker_release``); ``opened_half`` is True when this very
    admission moved the breaker from open to half-open. ``generation`` counts half-open
    periods, so probes of one period can be told from the next.
    """

    allowed: bool
    state: CircuitState
    at: float
    probe: str | None = None
    generation: int = 0
    opened_half: bool = False
    failed_open: bool = False  # the store failed: admitted unchecked


@dataclass(frozen=True, slots=True)
class Recorded:
    """A completion was recorded; ``before``/``after`` differ when it changed the state."""

    before: CircuitState
    after: CircuitState
    at: float

    @property
    def changed(self) -> bool:
        return self.before != self.after


class FleetState(Protocol):
    """The store-side operations of budgets and breakers (one atomic step each).

    ``clock`` overrides the store's clock (tests pass a fake one); None uses the
    store's: Redis ``TIME``, or the clock the memory or SQLite store was given.
    """

    def budget_first(self, service: str, window_s: float, clock: Clock) -> float:
        """Record a first attempt; return its instant."""
        ...

    def budget_retry(
        self, service: str, ratio: float, floor: float, window_s: float, clock: Clock
    ) -> BudgetVerdict:
        """Allow and record a retry if the window rule holds counting it; else refuse."""
        ...

    def breaker_admit(
        self, service: str, settings: BreakerSettings, token: str, clock: Clock
    ) -> Admission:
        """Admit a call (``token`` becomes the probe slot in half-open) or refuse it."""
        ...

    def breaker_record(
        self,
        service: str,
        settings: BreakerSettings,
        probe: str | None,
        failed: bool,
        open_for_s: float,
        clock: Clock,
    ) -> Recorded:
        """Record a completed call; open for ``open_for_s`` if it trips the breaker."""
        ...

    def breaker_release(self, service: str, probe: str) -> None:
        """Free a probe slot whose call ended without an outcome for the service."""
        ...


# -- the rules, shared by the memory and SQLite backends (Redis: fleet.lua) ----------


def corrupt_state(service: str, what: str, where: str) -> None:
    """Say once that a service's stored fleet state was unreadable and was reset.

    Someone else's write (or a bug) left it so; failing open (a fresh window, a
    closed breaker) keeps calls going, and resetting it makes this the only warning.
    """
    _log.warning("fleet state of %r in %s was corrupt (%s): reset, calls go ahead", service,
                 where, what)  # fmt: skip


def budget_allows(retries: int, first_attempts: int, ratio: float, floor: float, w: float) -> bool:
    """The window rule: counting this retry, retries <= ratio * firsts + floor * window."""
    return retries + 1 <= ratio * first_attempts + floor * w


def trips(calls: int, failures: int, settings: BreakerSettings) -> bool:
    """The opening rule over the completions in the window."""
    return calls >= settings.min_calls and failures >= settings.failure_ratio * calls


# -- memory --------------------------------------------------------------------------


@dataclass
class _MemoryService:
    firsts: deque[float] = field(default_factory=deque)
    retries: deque[float] = field(default_factory=deque)
    calls: deque[tuple[float, bool]] = field(default_factory=deque)
    failures: int = 0
    state: CircuitState = "closed"
    open_until: float = 0.0
    generation: int = 0
    probes: dict[str, float] = field(default_factory=dict)


def _trim(events: deque[float], before: float) -> None:
    while events and events[0] <= before:
        events.popleft()


class MemoryFleet:
    """Fleet state of a `MemoryStore`: one process, one lock."""

    def __init__(self, store_clock: Callable[[], float], is_closed: Callable[[], bool]) -> None:
        self._clock = store_clock
        self._is_closed = is_closed
        self._lock = threading.Lock()
        self._services: dict[str, _MemoryService] = {}

    def _service(self, name: str) -> _MemoryService:
        if self._is_closed():
            raise StoreError("the memory store is closed")
        found = self._services.get(name)
        if found is None:
            found = self._services[name] = _MemoryService()
        return found

    def _now(self, clock: Clock) -> float:
        return (clock or self._clock)()

    def budget_first(self, service: str, window_s: float, clock: Clock) -> float:
        with self._lock:
            state = self._service(service)
            now = self._now(clock)
            _trim(state.firsts, now - window_s)
            state.firsts.append(now)
            return now

    def budget_retry(
        self, service: str, ratio: float, floor: float, window_s: float, clock: Clock
    ) -> BudgetVerdict:
        with self._lock:
            state = self._service(service)
            now = self._now(clock)
            _trim(state.firsts, now - window_s)
            _trim(state.retries, now - window_s)
            retries, firsts = len(state.retries), len(state.firsts)
            limit = ratio * firsts + floor * window_s
            if not budget_allows(retries, firsts, ratio, floor, window_s):
                return BudgetVerdict(False, now, retries, firsts, limit)
            state.retries.append(now)
            return BudgetVerdict(True, now, retries + 1, firsts, limit)

    def breaker_admit(
        self, service: str, settings: BreakerSettings, token: str, clock: Clock
    ) -> Admission:
        with self._lock:
            state = self._service(service)
            now = self._now(clock)
            if state.state == "closed":
                return Admission(True, "closed", now, generation=state.generation)
            opened_half = False
            if state.state == "open":
                if settings.still_open(now, state.open_until):
                    return Admission(False, "open", now, generation=state.generation)
                state.state, opened_half = "half_open", True
                state.generation += 1
                state.probes.clear()
            state.probes = {
                t: until for t, until in state.probes.items() if settings.live_probe(now, until)
            }
            if len(state.probes) >= settings.half_open_calls:
                return Admission(False, "half_open", now, None, state.generation, opened_half)
            state.probes[token] = now + settings.probe_lease_s
            return Admission(True, "half_open", now, token, state.generation, opened_half)

    def breaker_record(
        self,
        service: str,
        settings: BreakerSettings,
        probe: str | None,
        failed: bool,
        open_for_s: float,
        clock: Clock,
    ) -> Recorded:
        with self._lock:
            state = self._service(service)
            now = self._now(clock)
            before = state.state
            was_probe = probe is not None and state.probes.pop(probe, None) is not None
            if was_probe and before == "half_open":
                self._leave(state, "open" if failed else "closed", now + open_for_s)
                return Recorded(before, state.state, now)
            if before != "closed":
                return Recorded(before, before, now)
            calls = state.calls
            while calls and calls[0][0] <= now - settings.window_s:
                state.failures -= calls.popleft()[1]
            calls.append((now, failed))
            state.failures += failed
            if trips(len(calls), state.failures, settings):
                self._leave(state, "open", now + open_for_s)
            return Recorded(before, state.state, now)

    @staticmethod
    def _leave(state: _MemoryService, to: CircuitState, open_until: float) -> None:
        state.state = to
        state.open_until = open_until if to == "open" else 0.0
        state.probes.clear()
        state.calls.clear()
        state.failures = 0

    def breaker_release(self, service: str, probe: str) -> None:
        with self._lock:
            self._service(service).probes.pop(probe, None)


# -- one fleet state per store object ------------------------------------------------

_STATES: weakref.WeakKeyDictionary[object, FleetState] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def fleet_state(store: object) -> FleetState:
    """The fleet state kept in ``store``'s backend (one per store object)."""
    make = _backend(store)
    with _STATES_LOCK:
        found = _STATES.get(store)
        if found is None:
            found = _STATES[store] = make()
        return found


def _backend(store: object) -> Callable[[], FleetState]:
    from ._memory import MemoryStore
    from ._sqlite import SQLiteStore

    if isinstance(store, MemoryStore):
        return lambda: MemoryFleet(store._clock, lambda: store._closed)
    if isinstance(store, SQLiteStore):
        from ._fleet_sqlite import SQLiteFleet

        return lambda: SQLiteFleet(store)
    if type(store).__name__ == "RedisStore":  # no redis import unless it is one
        from ._fleet_redis import RedisFleet
        from ._redis import RedisStore

        if isinstance(store, RedisStore):
            return lambda: RedisFleet(store)
    raise ConfigurationError(
        "retry budgets and circuit breakers keep their state in a MemoryStore, "
        f"SQLiteStore or RedisStore, got {type(store).__name__}"
    )
