"""The retry policy: which failures to retry, how long to wait, when to stop.

The policy is a pure function of its inputs (the error, the attempt number,
the wait so far, a random source), so every decision can be tested and
property-checked without a clock or a network.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Literal

from ._errors import ConfigurationError, ToolError
from ._fleetcheck import check_at_least, check_number

__all__ = [
    "AMBIGUOUS_CODES",
    "DEFAULT_RETRYABLE_CODES",
    "Decision",
    "RetryPolicy",
    "parse_retry_after",
]

DEFAULT_RETRYABLE_CODES: frozenset[str] = frozenset(
    {"timeout", "http_408", "http_429", "http_500", "http_502", "http_503", "http_504"}
)

# Failures after which a write may or may not have taken effect.
AMBIGUOUS_CODES: frozenset[str] = frozenset(
    {"timeout", "connection_error", "http_500", "http_502", "http_503", "http_504"}
)

_OWNER = "RetryPolicy"

StopStatus = Literal[
    "permanent_error", "unsafe_retry", "attempt_limit", "wait_budget", "deadline_exceeded"
]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do after a failed attempt: retry after ``delay_s``, or stop."""

    retry: bool
    delay_s: float = 0.0
    status: StopStatus | None = None
    # A server delay that did not fit the budget, so the caller can reschedule.
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded, capped exponential backoff with jitter.

    Delay after failure *n* is ``max(min(max_delay_s, base_delay_s * 2**(n-1))
    * (1 + uniform(0, jitter)), retry_after)``, rounded to 0.01 s.
    """

    retryable_codes: frozenset[str] = DEFAULT_RETRYABLE_CODES
    max_attempts: int = 4
    max_total_wait_s: float = 5.0
    base_delay_s: float = 0.5
    max_delay_s: float = 4.0
    jitter: float = 0.25
    # Optional per-call deadline: time inside the tool plus waits.
    deadline_s: float | None = None
    _retryable: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # NaN and infinity would slip past every comparison below and lift the bounds.
        check_at_least(_OWNER, "max_attempts", self.max_attempts, 1)
        for name in ("max_total_wait_s", "base_delay_s", "max_delay_s", "jitter"):
            check_number(_OWNER, name, getattr(self, name), positive=False)
        if not 0 <= self.jitter <= 1:
            raise ConfigurationError("jitter must be between 0 and 1")
        if self.deadline_s is not None:
            check_number(_OWNER, "deadline_s", self.deadline_s, positive=True)
        object.__setattr__(self, "_retryable", frozenset(self.retryable_codes))

    def backoff(self, failure_number: int, rng: random.Random) -> float:
        """The jittered exponential delay after failure ``failure_number`` (1-based)."""
        exponent = min(failure_number - 1, 62)  # 2**62 s is far past any cap
        raw = min(self.max_delay_s, self.base_delay_s * 2.0**exponent)
        return raw + rng.uniform(0.0, self.jitter * raw)

    def decide(
        self,
        error: ToolError,
        *,
        attempt: int,
        total_wait_s: float,
        safe_to_repeat: bool,
        rng: random.Random,
        elapsed_s: float = 0.0,
    ) -> Decision:
        """Answer, in order: retryable? safe? attempts left? fits the budget?"""
        if error.code not in self._retryable:
            return Decision(retry=False, status="permanent_error")
        if not safe_to_repeat:
            return Decision(retry=False, status="unsafe_retry")
        if attempt >= self.max_attempts:
            return Decision(retry=False, status="attempt_limit")
        delay = self.backoff(attempt, rng)
        server_delay = error.retry_after_s
        if server_delay is not None:
            delay = max(delay, server_delay)
        delay = round(delay, 2)
        if round(total_wait_s + delay, 2) > self.max_total_wait_s:
            return Decision(
                retry=False,
                status="wait_budget",
                retry_after_s=server_delay if server_delay is not None else None,
            )
        if self.deadline_s is not None and elapsed_s + delay > self.deadline_s:
            return Decision(retry=False, status="deadline_exceeded")
        return Decision(retry=True, delay_s=delay)

    def with_codes(self, codes: frozenset[str] | set[str]) -> RetryPolicy:
        """A copy of this policy retrying exactly ``codes``."""
        return RetryPolicy(
            retryable_codes=frozenset(codes),
            max_attempts=self.max_attempts,
            max_total_wait_s=self.max_total_wait_s,
            base_delay_s=self.base_delay_s,
            max_delay_s=self.max_delay_s,
            jitter=self.jitter,
            deadline_s=self.deadline_s,
        )


def parse_retry_after(value: str | float | int | None, *, now: float) -> float | None:
    """A ``Retry-After`` value in seconds, or ``None`` when it cannot be trusted.

    Accepts delta-seconds and HTTP-dates (RFC 9110). Invalid, negative,
    non-finite and past values are ignored, never trusted. ``now`` is the
    current wall-clock time (Unix seconds) used for HTTP-dates.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value >= 0 else None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a naive one is not trusted.
        return None
    delay = when.timestamp() - now
    return delay if delay >= 0 else None
