"""The design's 13 bicycle-share cases through the public API."""

from __future__ import annotations

import csv
import json

import pytest

from sample_traces._otel import DeterministicTelemetry
from sample_traces.bicycle import CASES, find_seed, run_cases, write_outputs
from toolspan.tracer import RetryPolicy

PUBLISHED = {  # case: (attempts, total_wait_s, final_status)
    "R02": (2, 0.56, "succeeded"),
    "R03": (2, 2.00, "succeeded"),
    "R07": (1, 0.00, "permanent_error"),
    "R10": (4, 4.13, "attempt_limit"),
    "R11": (1, 0.00, "wait_budget"),
    "R12": (1, 0.00, "unsafe_retry"),
    "R13": (2, 0.53, "succeeded"),
}


@pytest.fixture(scope="module")
def results():
    return {r.case.case_id: r for r in run_cases(DeterministicTelemetry())}


@pytest.mark.parametrize("case_id", sorted(PUBLISHED))
def test_published_rows_come_out_as_published(results, case_id):
    r = results[case_id]
    assert (r.attempts, round(r.total_wait_s, 2), r.status) == PUBLISHED[case_id]


def test_totals(results):
    assert len(results) == 13
    assert sum(r.attempts for r in results.values()) == 23
    assert sum(r.status == "succeeded" for r in results.values()) == 7
    assert sum(r.status != "succeeded" for r in results.values()) == 6


def test_every_wait_is_one_the_policy_allows(results):
    policy = RetryPolicy()
    for r in results.values():
        for event in r.attempt_log:
            if event.delay_s == 0:
                continue
            raw = min(policy.max_delay_s, policy.base_delay_s * 2 ** (event.attempt - 1))
            server = dict(enumerate(r.case.script)).get(event.attempt - 1)
            floor = server[1] if isinstance(server, tuple) else 0
            assert max(raw, floor) - 0.005 <= event.delay_s <= max(raw * 1.25, floor) + 0.005
        assert r.total_wait_s <= policy.max_total_wait_s


def test_unkeyed_write_ran_once_and_keyed_write_did_not_duplicate(results):
    assert results["R12"].side_effects == 1 and results["R12"].error_code == "unknown_outcome"
    assert results["R13"].side_effects == 1  # the service honoured the key on the retry
    assert results["R11"].retry_after_s == 12


@pytest.mark.parametrize("case_id, wait", [("R02", 0.56), ("R10", 4.13), ("R13", 0.53)])
def test_pinned_seeds_are_the_smallest_that_reproduce_the_published_waits(case_id, wait):
    case = next(c for c in CASES if c.case_id == case_id)
    assert find_seed(case, wait) == case.seed


def test_outputs_are_written(tmp_path):
    telemetry = DeterministicTelemetry()
    write_outputs(run_cases(telemetry), telemetry, tmp_path)
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    assert [r["case"] for r in rows] == [c.case_id for c in CASES]
    assert len(list(csv.DictReader((tmp_path / "attempts.csv").open()))) == 23
    lines = (tmp_path / "traces.jsonl").read_text().splitlines()
    spans = [
        s
        for line in lines
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
    ]
    assert len(spans) == 13 + 23  # one call span per case, one span per attempt
    assert "tok_4f9a1c2b" not in (tmp_path / "traces.jsonl").read_text()
