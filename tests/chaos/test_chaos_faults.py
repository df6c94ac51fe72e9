"""Chaos where the store fails too: every charge still happens exactly once.

A shorter run of each fault of ``bench/chaos_counts.py --faults all``: workers
SIGKILLed again and again right after their charge committed (each replaced),
the Redis server SIGKILLed and restarted in each persistence mode (under AOF
``everysec`` a power cut: an older AOF put back), the store unreachable for a
second (Redis paused, the SQLite file locked), and charges the service commits
after the client timed out (late commits). With loss
detection on, a Redis that restarts empty costs no duplicate either: keys it
forgot are read back (legacy service) or re-sent under their key (keyed service).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.faults import FaultRun, Faults, run_with_faults
from tests.chaos.scenario import Scenario
from tests.chaos.worker import StoreLocation
from tests.redis_server import RedisServer
from toolspan.tracer.store import SQLiteStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Two seconds of outage: the longer holds of a read-back-only service (its declared
# windows) leave workers idle for up to 1.5 s, and the outage must meet their writes.
FAULTS = Faults(kill_every_s=0.2, restarts=1, outages=1, outage_s=2.0)


def _assert_exactly_once(run: FaultRun, scenario: Scenario) -> dict[str, object]:
    counts = run.counts()
    print("\nchaos with faults:", counts)
    assert counts["crashed"] == 0, "a worker died of an error (its traceback is on stderr)"
    assert counts["unfinished"] == 0, "a worker ran out of time:\n" + "\n".join(run.stuck())
    assert counts["side_effects"] == scenario.actions
    assert (counts["duplicates"], counts["lost"]) == (0, 0)
    assert counts["kills"] >= 1 and counts["outages"] == 1  # the chaos was real
    assert counts["late_commits"] >= 1  # commits that landed after the client timed out
    assert counts["takeovers"] >= 1
    return counts


def test_sqlite_under_kills_and_a_locked_file(tmp_path: Path) -> None:
    scenario = Scenario(honours_keys=False, actions=100, workers=4)
    SQLiteStore(tmp_path / "store.db").close()
    store = StoreLocation("sqlite", str(tmp_path / "store.db"))
    run = run_with_faults(scenario, FAULTS, store, tmp_path / "run")
    _assert_exactly_once(run, scenario)


@pytest.mark.parametrize(
    ("persistence", "honours_keys"),
    [("none", False), ("none", True), ("everysec", False), ("always", False)],
    ids=["none-legacy", "none-keyed", "everysec-legacy", "always-legacy"],
)
def test_redis_under_kills_a_restart_and_an_outage(
    persistence: str, honours_keys: bool, tmp_path: Path
) -> None:
    scenario = Scenario(honours_keys=honours_keys, actions=100, workers=4)
    with RedisServer(persistence=persistence) as server:  # type: ignore[arg-type]
        store = StoreLocation("redis", server.url, prefix="chaos:")
        run = run_with_faults(scenario, FAULTS, store, tmp_path / "run", redis=server)
    counts = _assert_exactly_once(run, scenario)
    assert counts["restarts"] == 1
    assert counts["refused_store_unavailable"] >= 1  # the outage met keyed writes
    if persistence in ("none", "everysec"):
        # The empty restart, or the power cut's rollback (an older AOF put back), was
        # noticed: by a worker that knew the store (a loss), or by one new to it that
        # claimed first (a store that looks new: a restart no live worker can vouch for).
        assert counts["store_lost_seen"] + counts["store_new_seen"] >= 1
    if persistence == "always":
        assert counts["store_lost_seen"] == 0  # a durable store raises no false alarm


def test_without_faults_the_plan_runs_untouched(tmp_path: Path) -> None:
    # A guard for the harness itself: an empty fault set kills, restarts and pauses nothing.
    SQLiteStore(tmp_path / "s.db").close()
    scenario = Scenario(honours_keys=True, actions=20, workers=2)
    store = StoreLocation("sqlite", str(tmp_path / "s.db"))
    counts = run_with_faults(scenario, Faults(), store, tmp_path / "run").counts()
    assert (counts["kills"], counts["restarts"], counts["outages"]) == (0, 0, 0)
    assert counts["side_effects"] == 20 and counts["duplicates"] == 0


def test_a_killed_worker_still_counts_what_it_saw(tmp_path: Path) -> None:
    # A SIGKILLed worker leaves no report, only its last checkpoint: the counts
    # take the report where there is one and the checkpoint where there is not.
    import json

    from tests.chaos.faults import FaultRun

    seen = {"statuses": {"store_unavailable": 2}, "spans": {"store_lost": 1}}
    (tmp_path / "tally-11.json").write_text(json.dumps({"pid": 11, **seen}))
    (tmp_path / "tally-12.json").write_text(json.dumps({"pid": 12, **seen}))
    report = {"pid": 11, "statuses": {"store_unavailable": 5}, "spans": {"store_lost": 3}}

    class _Run:
        reports = [report]

    run = FaultRun(_Run(), 0, 0, 0, 0.0, workdir=tmp_path)  # type: ignore[arg-type]
    assert run.seen() == [report, {"pid": 12, **seen}]
