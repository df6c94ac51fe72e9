"""Chaos: OS processes racing keyed writes against a flaky service, one SIGKILLed.

Zero duplicate side effects and zero lost actions, with the SQLite and the
Redis store, against a legacy service (no key dedup; the tool declares a
read-back) and against one that honours keys (no read-back). See
``scenario.py`` for the plan and ``fake_service.py`` for the faults.
"""

from __future__ import annotations

import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.scenario import ChaosRun, Scenario, run_scenario
from tests.chaos.worker import StoreLocation
from tests.redis_server import RedisServer
from toolspan.tracer.store import SQLiteStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def _location(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreLocation:
    if backend == "sqlite":
        path = tmp_path / "store.db"
        SQLiteStore(path).close()  # create the schema once, before the race
        return StoreLocation("sqlite", str(path))
    server: RedisServer = request.getfixturevalue("redis_server")
    return StoreLocation("redis", server.url, prefix=f"chaos-{uuid.uuid4().hex}:")


@pytest.mark.parametrize("honours_keys", [False, True], ids=["legacy-service", "keyed-service"])
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_every_charge_happens_exactly_once(
    backend: str, honours_keys: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    scenario = Scenario(honours_keys=honours_keys)
    run = run_scenario(scenario, _location(backend, tmp_path, request), tmp_path / "run")
    counts = run.counts()
    print("\nchaos counts:", counts)

    # Every worker but the SIGKILLed one (replaced by a fresh process) ran to its end.
    assert Counter(run.exitcodes) == {-signal.SIGKILL: 1, 0: scenario.workers}
    assert len(run.reports) == scenario.workers
    assert all(report["unfinished"] == 0 for report in run.reports), "a worker ran out of time"
    assert _charges_per_order(run) == dict.fromkeys(scenario.orders, 1)
    assert counts["duplicates"] == 0 and counts["lost"] == 0
    _assert_every_result_names_the_one_charge(run)
    _assert_conflicts_never_ran(run)
    _assert_killed_action_was_taken_over(run)
    _assert_trace_matches_results(run)
    _assert_the_chaos_was_real(run, counts)
    if honours_keys:
        assert counts["read_backs"] == 0 and counts["reconciled"] == 0
    else:
        # Every response lost after a commit was settled by reading back, plus the takeover,
        # plus every late commit that landed (read back once its window had passed; one
        # whose process was killed before it landed never did, and its order ran again).
        settled = counts["committed_then_failed"] + 1
        assert settled <= counts["reconciled"] <= settled + counts["late_commits"]
        assert counts["late_commits"] > 0


def _charges_per_order(run: ChaosRun) -> dict[str, int]:
    counted = Counter({order: len(found) for order, found in run.charges.items()})
    return {order: counted[order] for order in run.scenario.orders} | dict(counted)


def _assert_every_result_names_the_one_charge(run: ChaosRun) -> None:
    """Fresh, replayed and reconciled results all return the single committed charge."""
    for outcome in run.outcomes:
        if outcome["kind"] == "conflict":
            continue
        ((charge_id, amount),) = run.charges[outcome["order_id"]]
        assert outcome["status"] == "succeeded", outcome
        assert (outcome["charge_id"], outcome["charged_amount"]) == (charge_id, amount), outcome
        assert amount == run.scenario.amount(outcome["order_id"])


def _assert_conflicts_never_ran(run: ChaosRun) -> None:
    conflicts = [o for o in run.outcomes if o["kind"] == "conflict"]
    assert conflicts, "the plan holds conflicting reuses of keys"
    for outcome in conflicts:
        assert outcome["status"] == "idempotency_conflict", outcome
        assert outcome["attempts"] == 0
        assert (outcome["order_id"], outcome["amount"]) not in run.charged_amounts


def _assert_killed_action_was_taken_over(run: ChaosRun) -> None:
    """The SIGKILLed worker's charge was committed; a takeover settled it once."""
    assert run.killed_exitcode == -signal.SIGKILL
    order = run.scenario.kill_order
    takeovers = [o for o in run.outcomes if o["order_id"] == order and o["claim"] == "takeover"]
    assert len(takeovers) == 1, [o for o in run.outcomes if o["order_id"] == order]
    (takeover,) = takeovers
    assert takeover["status"] == "succeeded"
    # The one charge is the one the dead worker's request committed.
    first_attempt, fault, pid = run.kill_order_requests[0]
    assert (first_attempt, fault, pid) == (1, "ok", run.killed_pid)
    assert takeover["charge_id"] == f"ch-{order}-1"
    read_back = _span_read_back(run, takeover["call_id"])
    if run.scenario.honours_keys:
        # No read-back: executing again is safe because the service dedupes by key.
        assert not takeover["reconciled"] and takeover["attempts"] >= 1
        assert read_back == "required"
        assert len(run.kill_order_requests) > 1
    else:
        # Read back before executing: found, so the tool never ran again.
        assert takeover["reconciled"] and takeover["attempts"] == 0
        assert read_back == "found"
        assert len(run.kill_order_requests) == 1


def _span_read_back(run: ChaosRun, call_id: str) -> str | None:
    for report in run.reports:
        found = report["spans"]["read_back"].get(call_id)
        if found is not None:
            return str(found)
    return None


def _assert_trace_matches_results(run: ChaosRun) -> None:
    """Every decision a worker saw is on a call span, in the same numbers."""
    for report in run.reports:
        spans = report["spans"]
        assert spans["statuses"] == report["statuses"]
        assert spans["replayed"] == sum(1 for o in report["outcomes"] if o["replayed"])
        assert spans["reconciled"] == sum(1 for o in report["outcomes"] if o["reconciled"])


def _assert_the_chaos_was_real(run: ChaosRun, counts: dict[str, int]) -> None:
    """Guard against a run that passes because nothing went wrong."""
    assert counts["committed_then_failed"] > 10
    assert counts["executions"] > counts["actions"]
    assert counts["replays"] > 0
    assert counts["in_progress_seen"] > 0
    assert counts["takeovers"] >= 1
    assert {o["order_id"] for o in run.outcomes} == set(run.scenario.orders)
    assert run.killed_pid not in {report["pid"] for report in run.reports}
