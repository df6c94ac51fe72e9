"""The seed's 13 bicycle cases, reproduced in a few lines with ``toolspan.testing``.

``sample_traces/bicycle.py`` needs a hand-written fake dock service (~60 lines);
here each case's script becomes a fault plan, the service is two functions that
record their effects in the kit's ledger, and every outcome must match.
"""

from __future__ import annotations

import pytest

from sample_traces._otel import DeterministicTelemetry
from sample_traces.bicycle import (
    CASES,
    DOCK_STATUS_SCHEMA,
    HOLD_SCHEMA,
    Case,
    _arguments,
    run_cases,
)
from toolspan.testing import Fault, FaultKit
from toolspan.tracer import Executor, Tool, ToolCall


def _fault(step: str | tuple[str, float]) -> Fault:
    code, retry_after = (step, None) if isinstance(step, str) else step
    if code == "ok":
        return Fault.ok()
    if code == "timeout":  # the dock service commits a hold, then the answer is lost
        return Fault.timeout_after_commit()
    return Fault.http_status(int(code.removeprefix("http_")), retry_after_s=retry_after)


def run_with_the_kit(case: Case) -> tuple[object, ...]:
    faults = [_fault(step) for step in case.script]
    kit = FaultKit(faults, then=faults[-1], seed=case.seed)  # the last step repeats, as there

    def get_dock_status(dock_id: str) -> dict:
        return {"dock_id": dock_id, "bikes_available": 4, "docks_free": 7}

    def hold_bicycle(dock_id: str, rider_id: str, payment_token: str | None = None,
                     idempotency_key: str | None = None) -> dict:  # fmt: skip
        kit.ledger.commit("hold", dock_id, key=idempotency_key)
        return {"hold_id": f"H-{dock_id}-{rider_id}", "expires_in_s": 600}

    executor = Executor(
        [
            Tool("get_dock_status", kit.wrap(get_dock_status), parameters=DOCK_STATUS_SCHEMA),
            # A case with no key is a hold the service takes no key for (as in the seed).
            Tool("hold_bicycle", kit.wrap(hold_bicycle), side_effect="write",
                 idempotent=case.idempotency_key is not None, parameters=HOLD_SCHEMA),
        ],
        **kit.executor_options(),
    )  # fmt: skip
    ids = case.case_id
    call = ToolCall(case.tool, f"call_{ids}", _arguments(case), f"bicycle-{ids}",
                    request_id=f"req-{ids}", idempotency_key=case.idempotency_key)  # fmt: skip
    r = executor.execute(call)
    effects = kit.ledger.count("hold")
    return r.status, r.error_code, r.attempts, round(r.total_wait_s, 2), r.retry_after_s, effects


@pytest.fixture(scope="module")
def seed_results() -> dict[str, tuple[object, ...]]:
    return {
        r.case.case_id: (
            r.status,
            r.error_code,
            r.attempts,
            round(r.total_wait_s, 2),
            r.retry_after_s,
            r.side_effects,
        )
        for r in run_cases(DeterministicTelemetry())
    }


@pytest.mark.parametrize("case", CASES, ids=[case.case_id for case in CASES])
def test_each_case_comes_out_as_the_seeds_fake_service_gives_it(case, seed_results):
    assert run_with_the_kit(case) == seed_results[case.case_id]


def test_the_published_rows_and_totals_hold_with_the_kit():
    rows = {case.case_id: run_with_the_kit(case) for case in CASES}
    assert rows["R10"][:4] == ("attempt_limit", "http_503", 4, 4.13)
    assert rows["R12"][0] == "unsafe_retry" and rows["R12"][5] == 1  # held once, never twice
    assert rows["R13"][2:4] == (2, 0.53) and rows["R13"][5] == 1  # the key held on the retry
    assert sum(row[2] for row in rows.values()) == 23
    assert sum(row[0] == "succeeded" for row in rows.values()) == 7
