"""RetryBudget: the window rule, exactly, on every backend, against a fake clock."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fleet.conftest import OpenStores
from toolspan.tracer import ConfigurationError, RetryBudget
from toolspan.tracer.store import MemoryStore, StoreError
from toolspan.tracer.testing import FakeClock

SERVICES = ("payments", "search")


@dataclass(frozen=True)
class Event:
    at: float
    service: str
    kind: str  # "first" or "retry"
    allowed: bool


def in_window(events: list[Event], service: str, kind: str, end: float, w: float) -> int:
    return sum(
        1
        for e in events
        if e.service == service and e.kind == kind and e.allowed and end - w < e.at <= end
    )


# Operations: a first attempt or a retry to a service, or time passing (steps that
# land exactly on window edges as well as between them).
operations = st.lists(
    st.one_of(
        st.tuples(st.just("first"), st.sampled_from(SERVICES)),
        st.tuples(st.just("retry"), st.sampled_from(SERVICES)),
        st.tuples(st.just("advance"), st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0, 2.5])),
    ),
    max_size=80,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=operations,
    ratio=st.sampled_from([0.0, 0.1, 0.2, 0.5, 1.0]),
    floor=st.sampled_from([0.0, 0.4, 1.0, 2.0]),
    window_s=st.sampled_from([0.5, 1.0, 2.5]),
    handles=st.integers(1, 3),
)
def test_retries_in_any_window_never_exceed_the_budget(
    open_stores: OpenStores,
    ops: list[tuple[str, object]],
    ratio: float,
    floor: float,
    window_s: float,
    handles: int,
) -> None:
    """At every allowed retry, the retries in the window ending there (counting it) are
    at most ratio x first attempts + floor x window; every refusal is one the rule
    demands (the budget is exact, not merely cautious); first attempts are always
    counted, whichever worker's handle makes them."""
    clock = FakeClock(1000.0)
    with open_stores(handles) as stores:
        budgets = [RetryBudget(ratio, floor, window_s, store, clock=clock) for store in stores]
        events: list[Event] = []
        for index, (kind, operand) in enumerate(ops):
            if kind == "advance":
                clock.advance(float(operand))  # type: ignore[arg-type]
                continue
            service, budget = str(operand), budgets[index % len(budgets)]
            if kind == "first":
                assert budget.record_first_attempt(service) == clock.now
                events.append(Event(clock.now, service, "first", True))
                continue
            verdict = budget.allow_retry(service)
            assert verdict.at == clock.now and not verdict.failed_open
            firsts = in_window(events, service, "first", clock.now, window_s)
            retries = in_window(events, service, "retry", clock.now, window_s)
            limit = ratio * firsts + floor * window_s
            assert (verdict.first_attempts, verdict.limit) == (firsts, limit)
            assert verdict.allowed == (retries + 1 <= limit), (retries, limit)
            events.append(Event(clock.now, service, "retry", verdict.allowed))
        for e in events:
            if e.kind == "retry" and e.allowed:
                counted = in_window(events, e.service, "retry", e.at, window_s)
                firsts = in_window(events, e.service, "first", e.at, window_s)
                assert counted <= ratio * firsts + floor * window_s


def test_the_floor_allows_retries_with_no_traffic_then_refuses() -> None:
    clock = FakeClock()
    budget = RetryBudget(ratio=0.5, min_retries_per_s=1.0, window_s=2.0, clock=clock)
    assert [budget.allow_retry("s").allowed for _ in range(3)] == [True, True, False]
    for _ in range(2):
        budget.record_first_attempt("s")
    assert budget.allow_retry("s").allowed  # 0.5 x 2 firsts = one more
    assert not budget.allow_retry("s").allowed
    clock.advance(2.0)  # everything slides out of the window
    verdict = budget.allow_retry("s")
    assert (verdict.allowed, verdict.retries, verdict.first_attempts) == (True, 1, 0)


def test_services_have_separate_budgets() -> None:
    budget = RetryBudget(ratio=0.0, min_retries_per_s=0.5, window_s=2.0, clock=FakeClock())
    assert budget.allow_retry("a").allowed and not budget.allow_retry("a").allowed
    assert budget.allow_retry("b").allowed


def test_budgets_on_one_store_share_the_window_and_others_do_not() -> None:
    clock, store = FakeClock(), MemoryStore()
    one, two = (RetryBudget(0.0, 0.5, 2.0, store, clock=clock) for _ in range(2))
    assert one.allow_retry("s").allowed
    assert not two.allow_retry("s").allowed
    assert RetryBudget(0.0, 0.5, 2.0, MemoryStore(), clock=clock).allow_retry("s").allowed


def test_the_store_clock_is_used_when_no_clock_is_given() -> None:
    clock = FakeClock(50.0)
    budget = RetryBudget(store=MemoryStore(clock=clock))
    assert budget.allow_retry("s").at == 50.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ratio": -0.1}, "ratio must be zero or more"),
        ({"ratio": math.nan}, "ratio must be a finite number"),
        ({"min_retries_per_s": -1}, "min_retries_per_s must be zero or more"),
        ({"window_s": 0}, "window_s must be positive"),
        ({"window_s": math.inf}, "window_s must be a finite number"),
        ({"window_s": "10"}, "window_s must be a finite number"),
        ({"ratio": True}, "ratio must be a finite number"),
        ({"store": object()}, "MemoryStore, SQLiteStore or RedisStore"),
    ],
)
def test_bad_configuration_is_refused_at_construction(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RetryBudget(**options)  # type: ignore[arg-type]


def test_a_failing_store_fails_open_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    budget = RetryBudget(ratio=0.0, min_retries_per_s=0.0, store=store)
    assert not budget.allow_retry("s").allowed  # a zero budget refuses while the store works
    store.close()
    with caplog.at_level(logging.WARNING, "toolspan.tracer"):
        verdict = budget.allow_retry("s")
        assert budget.record_first_attempt("s") is None
    assert verdict.allowed and verdict.failed_open
    assert "store failed" in caplog.text
    with pytest.raises(StoreError):
        store.get("x")  # the store itself still fails closed


def test_exhaustion_is_logged_once_per_change(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    budget = RetryBudget(ratio=0.0, min_retries_per_s=0.5, window_s=2.0, clock=clock)
    with caplog.at_level(logging.INFO, "toolspan.tracer"):
        for _ in range(4):
            budget.allow_retry("s")
        clock.advance(2.0)
        budget.allow_retry("s")
    messages = [r.getMessage() for r in caplog.records if r.name == "toolspan.tracer"]
    assert len(messages) == 2, messages
    assert "exhausted: 1 retries in the last 2s, limit 1.0" in messages[0]
    assert "allowed again" in messages[1]
