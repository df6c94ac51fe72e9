"""Property tests of the executor's invariants, against a scripted fake service."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.trace import NoOpTracerProvider

from toolspan.tracer import Executor, RetryPolicy, Tool, ToolCall, ToolError
from toolspan.tracer.testing import FakeClock

PERMANENT = ["http_400", "http_401", "http_403", "http_404", "http_409", "http_422"]
RETRYABLE = ["timeout", "http_408", "http_429", "http_500", "http_502", "http_503", "http_504"]
step = st.one_of(
    st.just("ok"),
    st.sampled_from(PERMANENT + RETRYABLE),
    st.tuples(st.sampled_from(["http_429", "http_503"]), st.floats(0, 20, allow_nan=False)),
)


def run(script, *, side_effect="none", idempotent=False, key=None, budget=5.0, attempts=4, seed=0):
    clock = FakeClock()
    executed: list[str] = []

    def service(**_: object) -> dict:
        answer = script[min(len(executed), len(script) - 1)]
        executed.append(answer if isinstance(answer, str) else answer[0])
        clock.advance(0.05)
        if answer == "ok":
            return {"ok": True}
        code, retry_after = (answer, None) if isinstance(answer, str) else answer
        raise ToolError(code, retry_after_s=retry_after)

    tool = Tool(
        "t",
        service,
        side_effect=side_effect,
        idempotent=idempotent,
        key_passed="scripted" if idempotent else None,
    )
    executor = Executor(
        [tool],
        policy=RetryPolicy(max_total_wait_s=budget, max_attempts=attempts),
        tracer_provider=NoOpTracerProvider(),
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(seed),
    )
    result = executor.execute(ToolCall("t", "c", {}, conversation_id="conv", idempotency_key=key))
    return result, executed, clock


@settings(max_examples=300)
@given(
    script=st.lists(step, min_size=1, max_size=8),
    budget=st.floats(0, 12, allow_nan=False),
    attempts=st.integers(1, 6),
    seed=st.integers(0, 10_000),
)
def test_never_waits_past_the_budget_nor_attempts_past_the_limit(script, budget, attempts, seed):
    result, executed, clock = run(script, budget=budget, attempts=attempts, seed=seed)
    assert sum(clock.slept) <= budget + 1e-9
    assert result.total_wait_s == round(sum(clock.slept), 2)
    assert len(executed) == result.attempts <= attempts
    assert result.ok == (executed[-1] == "ok")
    if not result.ok:
        assert result.data is None  # nothing invented


@settings(max_examples=300)
@given(
    script=st.lists(step, min_size=1, max_size=8),
    seed=st.integers(0, 10_000),
    idempotent=st.booleans(),
)
def test_a_write_without_a_key_is_never_executed_twice(script, seed, idempotent):
    _, executed, _ = run(script, side_effect="write", idempotent=idempotent, key=None, seed=seed)
    assert len(executed) == 1


@settings(max_examples=300)
@given(
    script=st.lists(step, min_size=1, max_size=8),
    seed=st.integers(0, 10_000),
    side_effect=st.sampled_from(["none", "write"]),
)
def test_a_permanent_error_is_never_retried(script, seed, side_effect):
    result, executed, _ = run(
        script,
        side_effect=side_effect,
        idempotent=side_effect == "write",
        key="k" if side_effect == "write" else None,
        seed=seed,
    )
    for index, outcome in enumerate(executed):
        if outcome in PERMANENT:
            assert index == len(executed) - 1
            assert result.status == "permanent_error"
