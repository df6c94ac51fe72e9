"""Fleet state of a `RedisStore`: Lua scripts (fleet.lua) on the store's client.

One script per operation, so a check and its record are one atomic step for the whole
fleet, decided on the Redis server's ``TIME`` unless a clock is injected. Keys carry
the service in a hash tag (``{service}``), so one service's keys share a cluster slot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._sql import load_statements
from ._fleet import (
    Admission,
    BreakerSettings,
    BudgetVerdict,
    CircuitState,
    Clock,
    Recorded,
    corrupt_state,
)

if TYPE_CHECKING:
    from ._redis import RedisStore

__all__ = ["RedisFleet"]

_SCRIPTS = load_statements(__package__, "fleet.lua")
# Windows stay in Redis this long after their last write (garbage collection only).
_GC_MARGIN_S = 60.0
_STATES: dict[bytes, CircuitState] = {
    b"closed": "closed",
    b"open": "open",
    b"half_open": "half_open",
}


class RedisFleet:
    def __init__(self, store: RedisStore) -> None:
        self._store = store
        client = store._client
        self._scripts = {name: client.register_script(src) for name, src in _SCRIPTS.items()}
        self._prefix = store._prefix

    def _keys(self, service: str, *names: str) -> list[str]:
        return [f"{self._prefix}fleet:{{{service}}}:{name}" for name in names]

    def _run(self, name: str, keys: list[str], *args: str | float | int) -> Any:
        with self._store._mapped(name):
            return self._scripts[name](keys=keys, args=list(args))

    @staticmethod
    def _now(clock: Clock) -> str:
        return "" if clock is None else repr(float(clock()))

    def budget_first(self, service: str, window_s: float, clock: Clock) -> float:
        keys = self._keys(service, "first", "seq")
        return float(self._run("budget_first", keys, self._now(clock), window_s, _GC_MARGIN_S))

    def budget_retry(
        self, service: str, ratio: float, floor: float, window_s: float, clock: Clock
    ) -> BudgetVerdict:
        keys = self._keys(service, "first", "retry", "seq")
        args = (self._now(clock), repr(ratio), repr(floor), repr(window_s), _GC_MARGIN_S)
        allowed, at, retries, firsts, limit = self._run("budget_retry", keys, *args)
        return BudgetVerdict(bool(allowed), float(at), int(retries), int(firsts), float(limit))

    def breaker_admit(
        self, service: str, settings: BreakerSettings, token: str, clock: Clock
    ) -> Admission:
        keys = self._keys(service, "breaker", "probes")
        args = (
            self._now(clock),
            settings.half_open_calls,
            repr(settings.probe_lease_s),
            token,
            repr(settings.open_s),
        )
        allowed, state, at, probe, generation, opened_half, corrupt = self._run(
            "breaker_admit", keys, *args
        )
        if corrupt:
            corrupt_state(service, "breaker hash", "Redis")
        return Admission(
            allowed=bool(allowed),
            state=_STATES[bytes(state)],
            at=float(at),
            probe=None if probe is None else bytes(probe).decode(),
            generation=int(generation),
            opened_half=bool(opened_half),
        )

    def breaker_record(
        self,
        service: str,
        settings: BreakerSettings,
        probe: str | None,
        failed: bool,
        open_for_s: float,
        clock: Clock,
    ) -> Recorded:
        keys = self._keys(service, "breaker", "probes", "calls", "failures", "seq")
        args = (
            self._now(clock),
            probe or "",
            "1" if failed else "0",
            repr(settings.window_s),
            settings.min_calls,
            repr(settings.failure_ratio),
            repr(open_for_s),
            _GC_MARGIN_S,
        )
        before, after, at, corrupt = self._run("breaker_record", keys, *args)
        if corrupt:
            corrupt_state(service, "breaker hash", "Redis")
        return Recorded(_STATES[bytes(before)], _STATES[bytes(after)], float(at))

    def breaker_release(self, service: str, probe: str) -> None:
        self._run("breaker_release", self._keys(service, "probes"), probe)
