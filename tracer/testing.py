"""Deterministic time for tests and demos: nothing sleeps for real.

>>> clock = FakeClock()
>>> executor = Executor(tools, sleep=clock.sleep, clock=clock, rng=random.Random(7))
"""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """A monotonic clock that only moves when something sleeps on it.

    Use the instance as ``clock`` and its :meth:`sleep` (or
    :meth:`async_sleep`) as the executor's sleeper. ``slept`` lists every
    requested delay, so tests can assert on the exact schedule.
    """

    def __init__(self, start: float = 0.0, *, epoch_s: float = 1_767_225_600.0) -> None:
        self.now = start
        self.epoch_s = epoch_s  # wall-clock time at ``now == 0`` (2026-01-01 UTC)
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)

    def time_ns(self) -> int:
        """The fake time as Unix nanoseconds: pass as the executor's ``span_clock``."""
        return round((self.epoch_s + self.now) * 1e9)

    def advance(self, seconds: float) -> None:
        """Move time forward, as if a tool took ``seconds`` to answer."""
        self.now += seconds
