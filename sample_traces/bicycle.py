"""The 13 bicycle-share cases of the design, run through the real tracer.

A deterministic fake dock service answers from a per-case script; each case
runs with its own seeded random source and a fake clock, so the attempts,
waits and even the span timestamps and ids are the same on every run.

Two tools: ``get_dock_status`` (reads) and ``hold_bicycle`` (writes, with or
without an idempotency key). ``run_cases()`` returns one row per case;
``write_outputs()`` writes ``cases.csv``, ``attempts.csv``, ``results.csv``
and ``traces.jsonl`` (OTLP/JSON lines).

Seeds: the published waits of R02 (0.56 s), R10 (4.13 s) and R13 (0.53 s)
depend on the jitter draw. Each case's seed is the smallest non-negative
integer whose ``random.Random(seed)`` makes the policy's jitter give the
published wait (found once with ``python -m sample_traces.bicycle --find-seeds``
and pinned below); the test suite checks both the seeds and the waits.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolspan.tracer import (
    AttemptEvent,
    CallEvent,
    Executor,
    RetryPolicy,
    Tool,
    ToolCall,
    ToolError,
)
from toolspan.tracer.testing import FakeClock

from ._otel import DeterministicTelemetry

__all__ = [
    "CASES",
    "Case",
    "CaseResult",
    "DockService",
    "format_table",
    "run_cases",
    "write_outputs",
]

# One step of a script: "ok", an error code, or (error code, Retry-After seconds).
Step = str | tuple[str, float]

DOCK_STATUS_SCHEMA = {
    "type": "object",
    "properties": {"dock_id": {"type": "string", "pattern": "^D[0-9]{3}$"}},
    "required": ["dock_id"],
    "additionalProperties": False,
}
HOLD_SCHEMA = {
    "type": "object",
    "properties": {
        "dock_id": {"type": "string"},
        "rider_id": {"type": "string"},
        "payment_token": {"type": "string"},
    },
    "required": ["dock_id", "rider_id"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Case:
    case_id: str
    scenario: str
    tool: str
    script: tuple[Step, ...]
    idempotency_key: str | None = None
    seed: int = 0


CASES: tuple[Case, ...] = (
    Case("R01", "dock status, ok at once", "get_dock_status", ("ok",)),
    Case("R02", "timeout, then ok", "get_dock_status", ("timeout", "ok"), seed=9),
    Case("R03", "429 with Retry-After 2, then ok", "get_dock_status", (("http_429", 2), "ok")),
    Case("R04", "502, 504, then ok", "get_dock_status", ("http_502", "http_504", "ok")),
    Case("R05", "keyed hold: 500, then ok", "hold_bicycle", ("http_500", "ok"), "hold-R05"),
    Case("R06", "hold without key, ok at once", "hold_bicycle", ("ok",)),
    Case("R07", "an invalid request (404 unknown dock)", "get_dock_status", ("http_404",)),
    Case(
        "R08", "keyed hold refused: 409 rider has a hold", "hold_bicycle", ("http_409",), "hold-R08"
    ),
    Case(
        "R09",
        "two 503s with Retry-After 3",
        "get_dock_status",
        (("http_503", 3), ("http_503", 3), "ok"),
    ),
    Case("R10", "four 503s", "get_dock_status", ("http_503",) * 4, seed=35),
    Case("R11", "429 with Retry-After 12", "get_dock_status", (("http_429", 12), "ok")),
    Case("R12", "write without key times out", "hold_bicycle", ("timeout", "ok")),
    Case("R13", "keyed write times out, then ok", "hold_bicycle", ("timeout", "ok"), "hold-R13", 3),
)

# Simulated service latency per attempt, so timelines look like real ones.
_LATENCY_S = (0.12, 0.08, 0.15, 0.1)


@dataclass
class DockService:
    """A deterministic fake of the remote dock API.

    Answers each request from ``script`` in order. A write that "times out"
    has still committed (the classic lost response), so side effects are
    counted per call, including the ones the caller never heard about. Like
    a real payments-style API it honours an ``Idempotency-Key``: a key it
    has seen commits nothing new.
    """

    script: Sequence[Step]
    clock: FakeClock
    requests: int = 0
    holds_committed: int = 0
    keys_seen: set[str] = field(default_factory=set)

    def _answer(self, *, write: bool, key: str | None = None) -> None:
        step = self.script[min(self.requests, len(self.script) - 1)]
        self.clock.advance(_LATENCY_S[self.requests % len(_LATENCY_S)])
        self.requests += 1
        code, retry_after = (step, None) if isinstance(step, str) else step
        if write and code in ("ok", "timeout"):
            self._commit(key)
        if code == "ok":
            return
        if code == "timeout":
            raise TimeoutError("dock service did not answer in 2 s")
        status = int(code.removeprefix("http_"))
        raise ToolError.from_status(
            status, f"dock service answered {status}", retry_after_s=retry_after
        )

    def _commit(self, key: str | None) -> None:
        if key is None or key not in self.keys_seen:
            self.holds_committed += 1  # committed, even if the response is lost next
        if key is not None:
            self.keys_seen.add(key)

    def get_dock_status(self, dock_id: str) -> dict[str, Any]:
        self._answer(write=False)
        return {"dock_id": dock_id, "bikes_available": 4, "docks_free": 7}

    def hold_bicycle(
        self,
        dock_id: str,
        rider_id: str,
        payment_token: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        # The executor passes the call's key; the service sees it as a header's value.
        self._answer(write=True, key=idempotency_key)
        return {"hold_id": f"H-{dock_id}-{rider_id}", "expires_in_s": 600}


@dataclass
class CaseResult:
    case: Case
    status: str
    error_code: str | None
    attempts: int
    total_wait_s: float
    retryable: bool
    retry_after_s: float | None
    side_effects: int
    attempt_log: list[AttemptEvent] = field(default_factory=list)


class _AttemptLog:
    """A hook that keeps every attempt event (the attempt log CSV)."""

    def __init__(self) -> None:
        self.events: list[AttemptEvent] = []

    def on_attempt(self, event: AttemptEvent) -> None:
        self.events.append(event)

    def on_call(self, event: CallEvent) -> None:
        return None


def _tools(service: DockService, *, keyed: bool) -> list[Tool]:
    """The dock's tools; ``keyed=False``: a hold the service takes no key for (a
    plain write, so the executor derives none and never retries it blind)."""
    return [
        Tool("get_dock_status", service.get_dock_status, parameters=DOCK_STATUS_SCHEMA),
        Tool(
            "hold_bicycle",
            service.hold_bicycle,
            side_effect="write",
            idempotent=keyed,  # hold_bicycle sends its idempotency_key parameter
            keys_honoured=True if keyed else None,  # the service dedupes holds by key
            parameters=HOLD_SCHEMA,
            schema_version="2026-01",
        ),
    ]


def _arguments(case: Case) -> dict[str, Any]:
    if case.tool == "get_dock_status":
        return {"dock_id": "D" + case.case_id[1:].zfill(3)}
    # A payment token rides along: it must never appear in a span.
    return {"dock_id": "D042", "rider_id": f"rider-{case.case_id}", "payment_token": "tok_4f9a1c2b"}


def run_case(case: Case, telemetry: DeterministicTelemetry, policy: RetryPolicy) -> CaseResult:
    """Run one case on a fresh fake service and clock."""
    clock = FakeClock(epoch_s=telemetry.epoch_for(case.case_id))
    service = DockService(case.script, clock)
    log = _AttemptLog()
    executor = Executor(
        _tools(service, keyed=case.idempotency_key is not None),
        policy=policy,
        tracer_provider=telemetry.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(case.seed),
        hooks=[log],
        span_clock=clock.time_ns,
    )
    call = ToolCall(
        name=case.tool,
        call_id=f"call_{case.case_id}",
        arguments=_arguments(case),
        conversation_id=f"bicycle-{case.case_id}",
        request_id=f"req-{case.case_id}",
        turn_id=f"turn-{case.case_id}-1",
        idempotency_key=case.idempotency_key,
    )
    result = executor.execute(call)
    return CaseResult(
        case=case,
        status=result.status,
        error_code=result.error_code,
        attempts=result.attempts,
        total_wait_s=result.total_wait_s,
        retryable=result.retryable,
        retry_after_s=result.retry_after_s,
        side_effects=service.holds_committed,
        attempt_log=log.events,
    )


def run_cases(telemetry: DeterministicTelemetry, cases: Sequence[Case] = CASES) -> list[CaseResult]:
    """Run every case with the default policy."""
    policy = RetryPolicy()
    return [run_case(case, telemetry, policy) for case in cases]


def write_outputs(
    results: Sequence[CaseResult], telemetry: DeterministicTelemetry, out: Path
) -> None:
    """Write the design's files: cases, attempt log, results (CSV) and traces."""
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(
        out / "cases.csv",
        ["case", "scenario", "tool", "side_effect", "idempotency_key", "script", "seed"],
        (
            [
                r.case.case_id,
                r.case.scenario,
                r.case.tool,
                "write" if r.case.tool == "hold_bicycle" else "none",
                r.case.idempotency_key or "",
                ";".join(
                    s if isinstance(s, str) else f"{s[0]}(retry_after={s[1]:g})"
                    for s in r.case.script
                ),
                r.case.seed,
            ]
            for r in results
        ),
    )
    _write_csv(
        out / "attempts.csv",
        ["case", "attempt", "outcome", "delay_s", "elapsed_wait_s"],
        (
            [r.case.case_id, e.attempt, e.outcome, f"{e.delay_s:.2f}", f"{e.total_wait_s:.2f}"]
            for r in results
            for e in r.attempt_log
        ),
    )
    _write_csv(
        out / "results.csv",
        [
            "case",
            "scenario",
            "attempts",
            "total_wait_s",
            "final_status",
            "error_code",
            "retryable",
            "retry_after_s",
        ],
        (
            [
                r.case.case_id,
                r.case.scenario,
                r.attempts,
                f"{r.total_wait_s:.2f}",
                r.status,
                r.error_code or "",
                str(r.retryable).lower(),
                "" if r.retry_after_s is None else f"{r.retry_after_s:.2f}",
            ]
            for r in results
        ),
    )
    telemetry.write_jsonl(out / "traces.jsonl")


def _write_csv(path: Path, header: list[str], rows: Any) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def format_table(results: Sequence[CaseResult]) -> str:
    """The results as the design's markdown table, plus the totals line."""
    lines = [
        "| case | scenario | attempts | total_wait_s | final_status |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.case.case_id} | {r.case.scenario} | {r.attempts} "
        f"| {r.total_wait_s:.2f} | {r.status} |"
        for r in results
    ]
    succeeded = sum(r.status == "succeeded" for r in results)
    lines.append(
        f"\nTotals: {len(results)} cases, {sum(r.attempts for r in results)} attempt events, "
        f"{succeeded} succeeded, {len(results) - succeeded} stopped."
    )
    return "\n".join(lines)


def find_seed(case: Case, wanted_wait: float, limit: int = 10_000) -> int:
    """The smallest seed whose jitter gives ``wanted_wait`` for ``case``."""
    for seed in range(limit):
        candidate = Case(
            case.case_id, case.scenario, case.tool, case.script, case.idempotency_key, seed
        )
        if run_case(candidate, DeterministicTelemetry(), RetryPolicy()).total_wait_s == wanted_wait:
            return seed
    raise LookupError(f"no seed below {limit} gives {wanted_wait} for {case.case_id}")


if __name__ == "__main__":  # pragma: no cover - a maintenance aid
    import sys

    if "--find-seeds" in sys.argv:
        published = {"R02": 0.56, "R10": 4.13, "R13": 0.53}
        for case in CASES:
            if case.case_id in published:
                print(case.case_id, find_seed(case, published[case.case_id]))
