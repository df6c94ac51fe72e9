"""The retry boundary: executes tool calls, retries what is safe, traces it all.

:class:`Executor` (sync) and :class:`AsyncExecutor` are the two drivers of
one core (``_core.Core``), which makes every decision and returns the next
action; each driver is a short loop that performs it: invoke the tool or its
read-back, sleep before a retry, or hand back the final result.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import enum
import inspect
import random
import time
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from opentelemetry.trace import TracerProvider

from ._batch import plan_lanes
from ._breaker import CircuitBreaker
from ._budget import RetryBudget
from ._capture import Capture
from ._core import INVOKE, Core, Run, Sleep, current_call
from ._hooks import Hook
from ._policy import RetryPolicy
from ._redact import Redactor
from ._result import ToolResult
from ._run import AgentRun, open_run
from ._safeguards import Safeguards
from ._tool import Tool, ToolCall

__all__ = ["AsyncExecutor", "Executor", "current_call"]

DEFAULT_MAX_RESULT_BYTES = 16 * 1024


class _InMemory(enum.Enum):
    """The default ``safeguards``: kept in memory (``None`` turns them off)."""

    IN_MEMORY = enum.auto()


IN_MEMORY = _InMemory.IN_MEMORY
_Coroutine = types.CoroutineType


_SleepT = TypeVar("_SleepT")


class _ExecutorBase(Generic[_SleepT]):
    """Construction shared by :class:`Executor` and :class:`AsyncExecutor`.

    ``sleep``, ``clock`` and ``rng`` are injectable; tests pass a fake clock
    (see :mod:`toolspan.tracer.testing`) so nothing sleeps for real.
    ``span_clock`` (Unix nanoseconds) stamps the spans instead of the SDK's
    clock: simulations and replays get timelines that match their fake time.
    ``safeguards`` holds the idempotency store and the turn and loop guards;
    without it they are kept in this process's memory
    (:meth:`Safeguards.in_memory`); a store makes them shared and durable;
    ``safeguards=None`` turns them off.
    ``retry_budget`` (:class:`RetryBudget`) bounds retries per downstream
    service across the fleet; ``circuit_breaker`` (:class:`CircuitBreaker`)
    fails calls fast while their service is failing. ``capture_arguments``
    and ``capture_results`` set how much of a call's arguments and result its
    span records: ``"off"``, ``"keys"``, ``"redacted"`` (through ``redactor``;
    ``Redactor(pii=True)`` masks personal data too) or ``"full"``; the
    hashes the analyzer needs are recorded at every level (see ``_capture``).
    Arguments default to ``"redacted"``, results to ``"off"``.
    """

    _default_sleep: Any

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        policy: RetryPolicy | None = None,
        tracer_provider: TracerProvider | None = None,
        redactor: Redactor | None = None,
        hash_key: bytes | str | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        sleep: _SleepT | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        hooks: Sequence[Hook] = (),
        span_clock: Callable[[], int] | None = None,
        safeguards: Safeguards | _InMemory | None = IN_MEMORY,
        retry_budget: RetryBudget | None = None,
        circuit_breaker: CircuitBreaker | None = None,
        capture_arguments: Capture = "redacted",
        capture_results: Capture = "off",
    ) -> None:
        self._core = Core(
            tools,
            policy=policy,
            tracer_provider=tracer_provider,
            redactor=redactor,
            hash_key=hash_key,
            max_result_bytes=max_result_bytes,
            clock=clock,
            rng=rng,
            hooks=hooks,
            span_clock=span_clock,
            safeguards=Safeguards.in_memory() if safeguards is IN_MEMORY else safeguards,
            retry_budget=retry_budget,
            circuit_breaker=circuit_breaker,
            capture_arguments=capture_arguments,
            capture_results=capture_results,
        )
        self._sleep: _SleepT = sleep if sleep is not None else type(self)._default_sleep

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The declared tools by name."""
        return self._core.tools

    @property
    def policy(self) -> RetryPolicy:
        """The retry policy (its ``max_total_wait_s`` is the wait budget of a call)."""
        return self._core.policy

    def run(
        self,
        name: str,
        *,
        request_id: str = "",
        conversation_id: str = "",
        delivery_id: str | None = None,
    ) -> AbstractContextManager[AgentRun]:
        """One handling of one request: an ``invoke_agent <name>`` span that the call
        spans inside are children of (one trace per request), and the ids those
        calls take when they carry none. Each run is one delivery of its request:
        the turn budget and the loop guard start afresh, keyed writes still replay.

        >>> with executor.run("agent", request_id=rid, conversation_id=cid):  # doctest: +SKIP
        ...     result = executor.execute(ToolCall.from_openai(tool_call, conversation_id=cid))
        """
        return open_run(
            self._core.spans,
            name,
            request_id=request_id,
            conversation_id=conversation_id,
            delivery_id=delivery_id,
        )


class Executor(_ExecutorBase[Callable[[float], None]]):
    """Executes tool calls synchronously behind the retry boundary.

    >>> executor = Executor([get_weather])            # doctest: +SKIP
    >>> result = executor.execute(ToolCall.from_openai(tool_call, conversation_id="c1"))
    >>> messages.append(result.to_openai_message())   # doctest: +SKIP

    Options: see :class:`_ExecutorBase` (policy, tracer provider, redactor,
    hash key, result size cap, sleep/clock/rng, hooks, span clock, safeguards).
    """

    _default_sleep = staticmethod(time.sleep)

    def execute(self, call: ToolCall) -> ToolResult:
        """Run ``call`` to a final, structured result."""
        core = self._core
        run = Run(call)
        action = core.begin(run)
        while not isinstance(action, ToolResult):
            if action is INVOKE:
                try:
                    value = run.fn(**run.kwargs)
                except Exception as exc:
                    action = core.raised(run, exc)
                else:
                    action = core.returned(run, value)
            else:
                assert isinstance(action, Sleep)
                self._sleep(action.delay_s)
                action = core.slept(run, action.delay_s)
        return action

    def execute_batch(self, calls: Sequence[ToolCall], *, max_workers: int = 8) -> list[ToolResult]:
        """Run the calls of one model step, in parallel where safe (see ``_batch``).

        Results come back in the model's order. A programming error in any
        call propagates after the other lanes finished.
        """
        lanes = plan_lanes(calls, self._core.tools)
        results: list[ToolResult | None] = [None] * len(calls)

        def run_lane(lane: list[int]) -> None:
            for index in lane:
                results[index] = self.execute(calls[index])

        if len(lanes) <= 1:
            for lane in lanes:
                run_lane(lane)
        else:
            workers = max(1, min(max_workers, len(lanes)))
            with concurrent.futures.ThreadPoolExecutor(workers, "toolspan-batch") as pool:
                # Each lane runs in a copy of this context, so spans keep their parent.
                futures = [
                    pool.submit(contextvars.copy_context().run, run_lane, lane) for lane in lanes
                ]
                for future in futures:
                    future.result()
        return [result for result in results if result is not None]

    def __call__(self, call: ToolCall) -> ToolResult:
        return self.execute(call)


class AsyncExecutor(_ExecutorBase[Callable[[float], Awaitable[None]]]):
    """The :class:`Executor` for asyncio: awaits async tools, sleeps without blocking.

    Sync tool functions are called directly (keep them non-blocking, or wrap
    them with :func:`asyncio.to_thread` yourself).
    """

    _default_sleep = staticmethod(asyncio.sleep)

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run ``call`` to a final, structured result."""
        core = self._core
        run = Run(call)
        action = core.begin(run)
        while not isinstance(action, ToolResult):
            if isinstance(action, Sleep):
                await self._sleep(action.delay_s)
                action = core.slept(run, action.delay_s)
                continue
            try:
                value = run.fn(**run.kwargs)
                # An async tool's coroutine, told apart without a call; any
                # other awaitable (a Future, a Task) still gets awaited.
                if type(value) is _Coroutine or inspect.isawaitable(value):
                    value = await value
            except Exception as exc:
                action = core.raised(run, exc)
            else:
                action = core.returned(run, value)
        return action

    async def execute_batch(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run the calls of one model step concurrently where safe; model order kept."""
        results: list[ToolResult | None] = [None] * len(calls)

        async def run_lane(lane: list[int]) -> None:
            for index in lane:
                results[index] = await self.execute(calls[index])

        await asyncio.gather(*(run_lane(lane) for lane in plan_lanes(calls, self._core.tools)))
        return [result for result in results if result is not None]

    async def __call__(self, call: ToolCall) -> ToolResult:
        return await self.execute(call)
