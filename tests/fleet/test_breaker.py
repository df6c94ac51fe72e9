"""CircuitBreaker: its state machine on every backend, against a reference model."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fleet.conftest import Fixed, OpenStores
from toolspan.tracer import CircuitBreaker, ConfigurationError
from toolspan.tracer.store import MemoryStore
from toolspan.tracer.store._fleet import Admission
from toolspan.tracer.testing import FakeClock

WORKERS = 4


@dataclass
class Model:
    """The breaker as the issue states it, written independently of the backends."""

    failure_ratio: float
    min_calls: int
    window_s: float
    open_s: float
    half_open_calls: int
    state: str = "closed"
    open_until: float = 0.0
    completions: list[tuple[float, bool]] = field(default_factory=list)
    probes: dict[int, float] = field(default_factory=dict)  # worker -> slot held until

    def admit(self, worker: int, now: float) -> tuple[bool, str]:
        if self.state == "open" and now >= self.open_until:
            self.state, self.probes = "half_open", {}
        if self.state == "closed":
            return True, "closed"
        if self.state == "open":
            return False, "open"
        live = {w: until for w, until in self.probes.items() if until > now}
        self.probes = live
        if len(live) >= self.half_open_calls:
            return False, "half_open"
        self.probes[worker] = now + self.open_s
        return True, "half_open"

    def record(self, worker: int, probe: bool, failed: bool, now: float) -> str:
        if probe and self.probes.pop(worker, None) is not None and self.state == "half_open":
            self._become("open" if failed else "closed", now)
            return self.state
        if self.state != "closed":
            return self.state
        self.completions = [(at, f) for at, f in self.completions if at > now - self.window_s]
        self.completions.append((now, failed))
        failures = sum(f for _, f in self.completions)
        if len(self.completions) >= self.min_calls and failures >= self.failure_ratio * len(
            self.completions
        ):
            self._become("open", now)
        return self.state

    def _become(self, state: str, now: float) -> None:
        self.state, self.completions, self.probes = state, [], {}
        self.open_until = now + self.open_s if state == "open" else 0.0


# Weighted towards what reaches half-open often: failures, time passing, admissions.
_KINDS = ("admit", "admit", "admit", "fail", "fail", "succeed", "release", "advance", "advance")
steps = st.lists(
    st.tuples(st.sampled_from(_KINDS), st.integers(0, 7), st.sampled_from([0.0, 0.5, 1.0])),
    max_size=120,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=steps,
    min_calls=st.integers(1, 4),
    failure_ratio=st.sampled_from([0.25, 0.5, 1.0]),
    half_open_calls=st.integers(1, 2),
)
def test_the_breaker_follows_its_state_machine_and_never_over_admits_probes(
    open_stores: OpenStores,
    steps: list[tuple[str, int, float]],
    min_calls: int,
    failure_ratio: float,
    half_open_calls: int,
) -> None:
    """Workers (each on its own store handle) admit calls and report them in any order
    while time moves; every admission and every state change matches the model, and
    never do more than half_open_calls probes hold a live slot at once."""
    clock = FakeClock(1000.0)
    window_s, open_s = 2.0, 1.0
    model = Model(failure_ratio, min_calls, window_s, open_s, half_open_calls)
    with open_stores(WORKERS) as stores:
        breakers = [
            CircuitBreaker(
                failure_ratio,
                min_calls,
                window_s,
                open_s,
                half_open_calls,
                store,
                clock=clock,
                rng=Fixed(0.0),
            )
            for store in stores
        ]
        busy: dict[int, Admission] = {}
        for kind, pick, seconds in steps:
            if kind == "advance":
                clock.advance(seconds)
                continue
            # pick a free worker to admit, a busy one to report
            free = [w for w in range(WORKERS) if w not in busy]
            candidates = free if kind == "admit" else sorted(busy)
            if not candidates:
                continue
            worker = candidates[pick % len(candidates)]
            breaker = breakers[worker]
            if kind == "admit":
                admission, transition = breaker.admit("svc")
                allowed, state = model.admit(worker, clock.now)
                assert (admission.allowed, admission.state) == (allowed, state)
                assert (transition is not None) == admission.opened_half
                assert (admission.probe is not None) == (allowed and state == "half_open")
                if allowed:
                    busy[worker] = admission
                # probes holding a live slot right now, fleet-wide
                live = [a for a in busy.values() if a.probe and a.at + open_s > clock.now]
                assert len(live) <= half_open_calls
                continue
            admission = busy.pop(worker)
            probe = admission.probe is not None
            if kind == "release":
                breaker.release("svc", admission)
                if probe:
                    model.probes.pop(worker, None)
                continue
            before = model.state
            after = model.record(worker, probe, kind == "fail", clock.now)
            transition = breaker.record("svc", admission, failed=kind == "fail")
            got = None if transition is None else (transition.before, transition.after)
            assert got == (None if before == after else (before, after))


def test_opens_on_the_failure_share_fails_fast_then_probes_and_closes() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(0.5, 4, 10.0, 5.0, 1, clock=clock, rng=Fixed(0.0))
    outcomes = [False, True, False, True]  # the 4th completion makes 2 of 4 failures
    transitions = []
    for failed in outcomes:
        admission, _ = breaker.admit("pay")
        assert admission.allowed and admission.state == "closed"
        transitions.append(breaker.record("pay", admission, failed=failed))
    assert transitions[:3] == [None, None, None]
    assert transitions[3] is not None and (transitions[3].before, transitions[3].after) == (
        "closed",
        "open",
    )
    clock.advance(4.99)
    assert breaker.admit("pay")[0].allowed is False
    clock.advance(0.01)
    probe, became = breaker.admit("pay")
    assert probe.allowed and probe.probe and became and became.after == "half_open"
    assert not breaker.admit("pay")[0].allowed  # one probe at a time
    closed = breaker.record("pay", probe, failed=False)
    assert closed is not None and closed.after == "closed"
    assert breaker.admit("pay")[0].state == "closed"


def test_a_failed_probe_reopens_and_a_released_probe_frees_its_slot() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1.0, 1, 10.0, 5.0, 1, clock=clock, rng=Fixed(0.0))
    breaker.record("s", breaker.admit("s")[0], failed=True)
    clock.advance(5.0)
    probe, _ = breaker.admit("s")
    breaker.release("s", probe)  # e.g. the tool raised a programming error
    probe, _ = breaker.admit("s")
    assert probe.allowed and probe.probe
    reopened = breaker.record("s", probe, failed=True)
    assert reopened is not None and (reopened.before, reopened.after) == ("half_open", "open")
    assert not breaker.admit("s")[0].allowed


def test_a_lost_probe_frees_its_slot_after_open_s() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1.0, 1, 10.0, 5.0, 1, clock=clock, rng=Fixed(0.0))
    breaker.record("s", breaker.admit("s")[0], failed=True)
    clock.advance(5.0)
    assert breaker.admit("s")[0].probe  # its worker dies: never reports
    clock.advance(4.9)
    assert not breaker.admit("s")[0].allowed
    clock.advance(0.1)
    assert breaker.admit("s")[0].probe


def test_open_s_is_jittered_down_never_up() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1.0, 1, 10.0, 10.0, 1, clock=clock, rng=Fixed(1.0))
    breaker.record("s", breaker.admit("s")[0], failed=True)
    clock.advance(8.99)
    assert not breaker.admit("s")[0].allowed
    clock.advance(0.01)  # open for 10 x (1 - 0.1 x 1.0) = 9 s
    assert breaker.admit("s")[0].allowed


def test_old_failures_slide_out_of_the_window() -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(0.5, 2, 1.0, 5.0, clock=clock)
    breaker.record("s", breaker.admit("s")[0], failed=True)
    clock.advance(1.0)
    assert breaker.record("s", breaker.admit("s")[0], failed=True) is None  # 1 call in window
    assert breaker.record("s", breaker.admit("s")[0], failed=False) is not None  # 1 of 2


def test_transitions_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    breaker = CircuitBreaker(1.0, 1, 10.0, 5.0, 1, clock=clock, rng=Fixed(0.0))
    with caplog.at_level(logging.INFO, "toolspan.tracer"):
        breaker.record("pay", breaker.admit("pay")[0], failed=True)
        clock.advance(5)
        breaker.record("pay", breaker.admit("pay")[0], failed=False)
    records = [r for r in caplog.records if r.name == "toolspan.tracer"]
    assert [r.getMessage() for r in records] == [
        "circuit breaker of 'pay': closed -> open",
        "circuit breaker of 'pay': open -> half_open",
        "circuit breaker of 'pay': half_open -> closed",
    ]
    assert records[0].levelno == logging.WARNING


def test_a_failing_store_fails_open() -> None:
    store = MemoryStore()
    breaker = CircuitBreaker(1.0, 1, store=store)
    breaker.record("s", breaker.admit("s")[0], failed=True)
    assert not breaker.admit("s")[0].allowed
    store.close()
    admission, transition = breaker.admit("s")
    assert admission.allowed and admission.failed_open and transition is None
    assert breaker.record("s", admission, failed=True) is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"failure_ratio": 0}, "failure_ratio must be positive"),
        ({"failure_ratio": 1.5}, "failure_ratio must be at most 1"),
        ({"min_calls": 0}, "min_calls must be an integer >= 1"),
        ({"min_calls": 2.5}, "min_calls must be an integer >= 1"),
        ({"window_s": 0}, "window_s must be positive"),
        ({"open_s": -1}, "open_s must be positive"),
        ({"half_open_calls": 0}, "half_open_calls must be an integer >= 1"),
        ({"store": "redis://x"}, "MemoryStore, SQLiteStore or RedisStore"),
    ],
)
def test_bad_configuration_is_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        CircuitBreaker(**options)  # type: ignore[arg-type]
