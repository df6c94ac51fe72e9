"""The retry policy as a pure function: delays, Retry-After, stop reasons."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.tracer import ConfigurationError, RetryPolicy, ToolError, parse_retry_after

NOW = 1_767_225_600.0


def decide(
    policy: RetryPolicy,
    error: ToolError,
    attempt: int = 1,
    waited: float = 0.0,
    safe: bool = True,
    seed: int = 0,
    elapsed: float = 0.0,
):
    return policy.decide(
        error,
        attempt=attempt,
        total_wait_s=waited,
        safe_to_repeat=safe,
        rng=random.Random(seed),
        elapsed_s=elapsed,
    )


@pytest.mark.parametrize(
    "failure, low, high",
    [(1, 0.5, 0.625), (2, 1.0, 1.25), (3, 2.0, 2.5), (4, 4.0, 5.0), (9, 4.0, 5.0)],
)
def test_backoff_is_capped_exponential_with_up_to_25_percent_jitter(failure, low, high):
    policy = RetryPolicy()
    delays = [policy.backoff(failure, random.Random(seed)) for seed in range(200)]
    assert min(delays) >= low and max(delays) <= high
    assert max(delays) - min(delays) > (high - low) / 2  # the jitter is really used


def test_retry_after_raises_the_delay_but_never_lowers_it():
    policy = RetryPolicy()
    assert decide(policy, ToolError("http_429", retry_after_s=2)).delay_s == 2.0
    low = decide(policy, ToolError("http_429", retry_after_s=0.01))
    assert 0.5 <= low.delay_s <= 0.63


@pytest.mark.parametrize(
    "code",
    [
        "http_400",
        "http_401",
        "http_403",
        "http_404",
        "http_409",
        "http_422",
        "connection_error",
        "boom",
    ],
)
def test_codes_outside_the_retryable_set_are_permanent(code):
    assert decide(RetryPolicy(), ToolError(code)).status == "permanent_error"


def test_order_retryable_then_safe_then_attempts_then_budget():
    policy = RetryPolicy(max_attempts=2, max_total_wait_s=1.0)
    assert decide(policy, ToolError("http_400"), safe=False).status == "permanent_error"
    assert decide(policy, ToolError("timeout"), attempt=2, safe=False).status == "unsafe_retry"
    assert decide(policy, ToolError("timeout"), attempt=2, waited=9).status == "attempt_limit"
    over = decide(policy, ToolError("http_503", retry_after_s=3))
    assert (over.status, over.retry_after_s) == ("wait_budget", 3)


def test_deadline_counts_time_spent_inside_the_tool():
    policy = RetryPolicy(deadline_s=2.0)
    assert decide(policy, ToolError("timeout"), elapsed=1.9).status == "deadline_exceeded"
    assert decide(policy, ToolError("timeout"), elapsed=0.1).retry


def test_custom_retryable_codes():
    policy = RetryPolicy().with_codes({"connection_error"})
    assert decide(policy, ToolError("connection_error")).retry
    assert decide(policy, ToolError("timeout")).status == "permanent_error"


@pytest.mark.parametrize(
    "kwargs", [{"max_attempts": 0}, {"jitter": 2}, {"base_delay_s": -1}, {"deadline_s": 0}]
)
def test_bad_policies_are_refused_at_declaration(kwargs):
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2", 2.0),
        ("0", 0.0),
        (" 120 ", 120.0),
        (3, 3.0),
        (1.5, 1.5),
        ("-1", None),
        (-4, None),
        ("soon", None),
        ("", None),
        (None, None),
        ("1e3", None),
        (float("nan"), None),
        (float("inf"), None),
        (True, None),
    ],
)
def test_retry_after_delta_seconds(value, expected):
    assert parse_retry_after(value, now=NOW) == expected


def test_retry_after_http_dates():
    later = format_datetime(datetime.fromtimestamp(NOW + 30, tz=UTC), usegmt=True)
    earlier = format_datetime(datetime.fromtimestamp(NOW - 30, tz=UTC), usegmt=True)
    assert parse_retry_after(later, now=NOW) == pytest.approx(30.0)
    assert parse_retry_after(earlier, now=NOW) is None  # past: ignored, never trusted
    assert parse_retry_after("Wed, 31 Dec 2025 99:00:00 GMT", now=NOW) is None


codes = st.sampled_from(["timeout", "http_429", "http_503", "http_500", "http_400", "http_404"])
retry_after = st.one_of(st.none(), st.floats(0, 30, allow_nan=False))


@given(
    steps=st.lists(st.tuples(codes, retry_after), min_size=1, max_size=12),
    budget=st.floats(0, 20, allow_nan=False),
    max_attempts=st.integers(1, 8),
    seed=st.integers(0, 2**32),
)
def test_property_schedule_never_exceeds_budget_or_attempts(steps, budget, max_attempts, seed):
    policy = RetryPolicy(max_attempts=max_attempts, max_total_wait_s=budget)
    rng = random.Random(seed)
    waited, attempt = 0.0, 0
    for code, server_delay in steps:
        attempt += 1
        decision = policy.decide(
            ToolError(code, retry_after_s=server_delay),
            attempt=attempt,
            total_wait_s=waited,
            safe_to_repeat=True,
            rng=rng,
        )
        if code in ("http_400", "http_404"):
            assert decision.status == "permanent_error"  # never retried
        if not decision.retry:
            break
        assert decision.delay_s >= 0
        if server_delay is not None:
            assert decision.delay_s >= round(server_delay, 2) - 0.005
        waited = round(waited + decision.delay_s, 2)
    assert waited <= budget + 1e-9
    assert attempt <= max_attempts
