"""The executor with a retry budget and a circuit breaker: statuses, spans, metrics."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.tracer.conftest import Scripted, Spans
from toolspan.tracer import (
    AsyncExecutor,
    CircuitBreaker,
    ConfigurationError,
    Executor,
    RetryBudget,
    RetryPolicy,
    Tool,
    ToolCall,
    ToolError,
)
from toolspan.tracer.store import MemoryStore
from toolspan.tracer.testing import FakeClock

E503 = ToolError.from_status(503)
# No waiting between attempts: a retry's budget decision and its attempt are one instant.
NO_WAIT = RetryPolicy(base_delay_s=0.0, jitter=0.0)


def call(n: int = 1, name: str = "charge") -> ToolCall:
    return ToolCall(name, f"call-{n}", {}, conversation_id="conv")


def metric_points(reader: InMemoryMetricReader) -> dict[tuple[str, tuple[Any, ...]], Any]:
    points = {}
    for resource_metrics in reader.get_metrics_data().resource_metrics:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted(point.attributes.items())))
                    points[key] = point.value
    return points


def test_tools_name_their_service_and_default_to_their_name() -> None:
    assert Tool("charge", lambda: 1, service="payments").service == "payments"
    assert Tool("charge", lambda: 1).service == "charge"
    with pytest.raises(ConfigurationError, match="service must be a string"):
        Tool("charge", lambda: 1, service=3)  # type: ignore[arg-type]


def test_the_executor_checks_what_it_is_given() -> None:
    with pytest.raises(ConfigurationError, match="retry_budget must be a RetryBudget"):
        Executor([], retry_budget=CircuitBreaker())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="circuit_breaker must be a CircuitBreaker"):
        Executor([], circuit_breaker=RetryBudget())  # type: ignore[arg-type]


def test_a_refused_retry_stops_before_sleeping_and_keeps_the_error_code(
    spans: Spans, clock: FakeClock, make_executor: Callable[..., Executor]
) -> None:
    reader = InMemoryMetricReader()
    budget = RetryBudget(
        ratio=0.0,
        min_retries_per_s=0.1,
        window_s=10.0,
        clock=clock,
        meter_provider=MeterProvider(metric_readers=[reader]),
    )  # fmt: skip  (one retry per 10 s window)
    fake = Scripted(E503)
    executor = make_executor([Tool("charge", fake, service="payments")], retry_budget=budget)
    first = executor.execute(call(1))
    assert (first.ok, first.status, first.error_code, first.retryable) == (
        False, "retry_budget", "http_503", True,
    )  # fmt: skip
    assert first.attempts == 2 and len(clock.slept) == 1  # the refused retry never slept
    assert "retry budget of service 'payments'" in first.message
    span = spans.calls()[0]
    attrs = spans.attrs(span)
    assert attrs["toolspan.status"] == "retry_budget"
    assert attrs["toolspan.retry.budget"] == "payments"
    assert attrs["toolspan.service"] == "payments"
    (event,) = [e for e in span.events if e.name == "toolspan.retry.budget.refused"]
    assert dict(event.attributes or {}) == {
        "toolspan.service": "payments",
        "toolspan.retry.budget.retries": 1,
        "toolspan.retry.budget.first_attempts": 1,
        "toolspan.retry.budget.limit": 1.0,
    }
    assert spans.attrs(spans.attempts()[-1])["toolspan.retry.delay_s"] == 0.0
    second = executor.execute(call(2))  # a first attempt is never refused
    assert (second.status, second.attempts, len(fake.calls)) == ("retry_budget", 1, 3)
    points = metric_points(reader)
    assert points[("toolspan.retry.budget.refused", (("toolspan.service", "payments"),))] == 2


def test_tools_of_one_service_share_its_budget(
    clock: FakeClock, make_executor: Callable[..., Executor]
) -> None:
    budget = RetryBudget(ratio=0.0, min_retries_per_s=0.1, window_s=10.0, clock=clock)
    tools = [
        Tool("charge", Scripted(E503), service="payments"),
        Tool("refund_status", Scripted(E503), service="payments"),
        Tool("search", Scripted(E503)),
    ]
    executor = make_executor(tools, retry_budget=budget)
    assert executor.execute(call(1, "charge")).attempts == 2
    assert executor.execute(call(2, "refund_status")).attempts == 1
    assert executor.execute(call(3, "search")).attempts == 2  # its own service


def test_the_breaker_opens_fails_fast_then_probes_and_closes(
    spans: Spans, clock: FakeClock, make_executor: Callable[..., Executor]
) -> None:
    reader = InMemoryMetricReader()
    breaker = CircuitBreaker(
        failure_ratio=1.0, min_calls=2, window_s=60.0, open_s=30.0, clock=clock,
        rng=random.Random(0), meter_provider=MeterProvider(metric_readers=[reader]),
    )  # fmt: skip
    fake = Scripted(E503, E503, {"paid": True})
    executor = make_executor([Tool("charge", fake, service="payments")], circuit_breaker=breaker)

    tripped = executor.execute(call(1))  # 2 failed attempts trip it; the 3rd is refused
    assert (tripped.status, tripped.error_code, tripped.attempts, tripped.retryable) == (
        "circuit_open", "http_503", 2, True,
    )  # fmt: skip
    span = spans.calls()[0]
    assert spans.attrs(span)["toolspan.circuit.state"] == "open"
    assert [dict(e.attributes or {}) for e in span.events] == [
        {"toolspan.service": "payments", "toolspan.circuit.from": "closed",
         "toolspan.circuit.to": "open"},
    ]  # fmt: skip

    fast = executor.execute(call(2))
    assert (fast.status, fast.error_code, fast.attempts, len(fake.calls)) == (
        "circuit_open", "circuit_open", 0, 2,
    )  # fmt: skip
    assert "nothing was executed" in fast.message
    assert len(spans.attempts()) == 2  # no attempt span: nothing ran

    clock.advance(30.0)
    probed = executor.execute(call(3))
    assert probed.status == "succeeded" and len(fake.calls) == 3
    span = spans.calls()[-1]
    assert [(e.attributes or {})["toolspan.circuit.to"] for e in span.events] == [
        "half_open",
        "closed",
    ]
    assert spans.attrs(span)["toolspan.circuit.state"] == "half_open"
    probe_attempt = max(spans.attempts(), key=lambda s: s.start_time or 0)
    assert spans.attrs(probe_attempt)["toolspan.circuit.probe"] is True
    points = metric_points(reader)
    for before, after in (("closed", "open"), ("open", "half_open"), ("half_open", "closed")):
        key = (
            "toolspan.circuit.transitions",
            (("toolspan.circuit.from", before), ("toolspan.circuit.to", after),
             ("toolspan.service", "payments")),
        )  # fmt: skip
        assert points[key] == 1


def test_a_programming_error_frees_the_probe_slot(
    clock: FakeClock, make_executor: Callable[..., Executor]
) -> None:
    breaker = CircuitBreaker(1.0, 1, 60.0, 5.0, clock=clock, rng=random.Random(0))
    fake = Scripted(E503, KeyError("bug"), {"ok": 1})
    executor = make_executor([Tool("charge", fake)], circuit_breaker=breaker)
    assert executor.execute(call(1)).status == "circuit_open"
    clock.advance(5.0)
    with pytest.raises(KeyError):
        executor.execute(call(2))
    assert executor.execute(call(3)).status == "succeeded"  # the slot was given back


def test_non_retryable_failures_do_not_trip_the_breaker(
    clock: FakeClock, make_executor: Callable[..., Executor]
) -> None:
    breaker = CircuitBreaker(0.5, 2, 60.0, 5.0, clock=clock)
    # The guards off: five identical 404s in one conversation would be a loop.
    executor = make_executor([Tool("charge", Scripted(ToolError.from_status(404)))],
                             circuit_breaker=breaker, safeguards=None)  # fmt: skip
    for n in range(5):
        assert executor.execute(call(n)).status == "permanent_error"


def test_a_failing_store_fails_open_and_the_span_says_so(
    spans: Spans, make_executor: Callable[..., Executor]
) -> None:
    store = MemoryStore()
    budget, breaker = RetryBudget(store=store), CircuitBreaker(store=store)
    store.close()
    fake = Scripted(E503, {"ok": 1})
    executor = make_executor([Tool("charge", fake)], retry_budget=budget, circuit_breaker=breaker)
    result = executor.execute(call(1))
    assert result.status == "succeeded" and result.attempts == 2
    attrs = spans.attrs(spans.call())
    assert attrs["toolspan.circuit.state"] == "unknown"
    assert attrs["toolspan.retry.budget.failed_open"] is True


def test_the_async_executor_has_both(spans: Spans, clock: FakeClock) -> None:
    budget = RetryBudget(ratio=0.0, min_retries_per_s=0.1, window_s=10.0, clock=clock)
    breaker = CircuitBreaker(1.0, 3, 60.0, 30.0, clock=clock, rng=random.Random(0))

    async def failing(**_: Any) -> Any:
        raise E503

    executor = AsyncExecutor(
        [Tool("charge", failing)], tracer_provider=spans.provider, sleep=clock.async_sleep,
        clock=clock, rng=random.Random(0), retry_budget=budget, circuit_breaker=breaker,
    )  # fmt: skip

    async def main() -> list[str]:
        return [(await executor.execute(call(n))).status for n in range(3)]

    # 2 attempts (budget), 1 attempt (budget) -> 3 failures open it; then fail fast
    assert asyncio.run(main()) == ["retry_budget", "retry_budget", "circuit_open"]


class Service:
    """A fake service whose every call follows a script per call id; logs what it got."""

    def __init__(self, clock: FakeClock, scripts: list[list[bool]]) -> None:
        self.clock = clock
        self.scripts = scripts  # per call: does attempt 1, 2, ... fail with a 503?
        self.attempts: dict[int, int] = {}
        self.log: list[tuple[float, int]] = []  # (instant, attempt number)

    def __call__(self, n: int) -> dict[str, int]:
        attempt = self.attempts[n] = self.attempts.get(n, 0) + 1
        self.log.append((self.clock.now, attempt))
        script = self.scripts[n]
        if attempt <= len(script) and script[attempt - 1]:
            raise E503
        return {"n": n}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    scripts=st.lists(st.lists(st.booleans(), max_size=4), min_size=1, max_size=25),
    gaps=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=25, max_size=25),
    ratio=st.sampled_from([0.0, 0.2, 0.5]),
    floor=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_executor_retries_in_any_window_stay_within_the_budget(
    scripts: list[list[bool]], gaps: list[float], ratio: float, floor: float
) -> None:
    """Calls whose attempts fail as scripted, with time passing between calls: every
    call makes its first attempt, every retry the service sees fits the window rule at
    its instant, and a call stops with retry_budget only when one more retry would not."""
    clock, w = FakeClock(), 2.0
    service = Service(clock, scripts)
    budget = RetryBudget(ratio, floor, w, clock=clock)
    executor = Executor(
        [Tool("charge", service)],
        policy=NO_WAIT, tracer_provider=trace.NoOpTracerProvider(), sleep=clock.sleep,
        clock=clock, rng=random.Random(0), retry_budget=budget,
    )  # fmt: skip

    def counted(kind_first: bool, end: float) -> int:
        return sum(1 for at, a in service.log if (a == 1) == kind_first and end - w < at <= end)

    for n in range(len(scripts)):
        before = len(service.log)
        result = executor.execute(ToolCall("charge", f"c{n}", {"n": n}, conversation_id="c"))
        assert len(service.log) > before and service.log[before][1] == 1  # first attempt made
        if result.status == "retry_budget":
            assert result.error_code == "http_503" and result.retryable
            retries = counted(False, clock.now)
            assert retries + 1 > ratio * counted(True, clock.now) + floor * w
        clock.advance(gaps[n])
    for at, attempt in service.log:
        if attempt > 1:
            assert counted(False, at) <= ratio * counted(True, at) + floor * w
