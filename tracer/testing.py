"""Deterministic time for tests and demos, and the contract test of a keyed write.

>>> clock = FakeClock()
>>> executor = Executor(tools, sleep=clock.sleep, clock=clock, rng=random.Random(7))

:func:`check_keys_honoured` is the test to run against a service before
declaring a tool ``keys_honoured=True``.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ._current import CURRENT_CALL
from ._errors import ConfigurationError
from ._signature import KEY_PARAMETER
from ._tool import Tool, ToolCall

__all__ = ["FakeClock", "check_keys_honoured"]


def check_keys_honoured(
    declared: Tool,
    arguments: Mapping[str, Any],
    count_effects: Callable[[], int],
    *,
    key: str | None = None,
) -> None:
    """Run ``declared``'s function twice under one idempotency key: the service must apply it once.

    The contract test behind ``keys_honoured=True``: run it against the real
    service (a staging instance or its local build) in your test suite. The
    key reaches the function as the executor passes it: as its
    ``idempotency_key`` parameter and as :func:`~toolspan.tracer.current_call`
    (which :func:`~toolspan.tracer.send_idempotency_key` sends as a header).
    ``count_effects()`` counts the effects the write leaves (the refunds in the
    ledger, say); it is read before the first run and after each run. ``key``
    defaults to a fresh one, so that no earlier run of the test answers for it.

    Raises ``AssertionError`` saying what the service did when it is not one
    effect after both runs (two: it ignores the key; none: the write did
    nothing at all, so the test proves nothing).
    """
    if not declared.idempotent:
        raise ConfigurationError(
            f"tool {declared.name!r} is not idempotent: it sends no key to check"
        )
    key = key or f"toolspan-contract-{uuid.uuid4()}"
    call = ToolCall(
        declared.name, "contract-test", dict(arguments), "contract-test", idempotency_key=key
    )
    kwargs = dict(arguments)
    if declared._takes_key:
        kwargs[KEY_PARAMETER] = key
    before = count_effects()
    counts = []
    for _ in range(2):
        token = CURRENT_CALL.set(call)
        try:
            done = declared.fn(**kwargs)
            if inspect.isawaitable(done):
                asyncio.run(_awaited(done))  # an async tool, from a synchronous test
        finally:
            CURRENT_CALL.reset(token)
        counts.append(count_effects() - before)
    if counts[0] != 1:
        raise AssertionError(
            f"{declared.name}: the first run left {counts[0]} effects instead of 1; "
            "count_effects does not count what this write does, so nothing is proven"
        )
    if counts[1] != 1:
        raise AssertionError(
            f"{declared.name}: the service applied one idempotency key {counts[1]} times: "
            f"it does not honour the key ({declared.key_route}), so do not declare "
            "keys_honoured=True; give the tool a read_back instead"
        )


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


async def _awaited(awaitable: Any) -> None:
    await awaitable
