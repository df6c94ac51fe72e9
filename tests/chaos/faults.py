"""Chaos with the store failing too: repeated kills, Redis restarts, store outages.

`run_with_faults` runs the same plan as `scenario.run_scenario` (``plan``), under a
supervisor that, while the workers run:

* **kills** a worker about every ``kill_every_s``: it arms an `ArmedKill`, the next
  worker whose charge commits takes it and blocks (the response is lost), and the
  supervisor SIGKILLs it and starts a replacement with the same plan;
* **restarts** the Redis server ``restarts`` times: SIGKILL, then start it again on
  the same port and directory (what comes back depends on its persistence mode).
  Under AOF ``everysec`` the restart is a **power cut**: the append-only files are
  copied, the workers run on for ``power_cut_loses_s``, and the copy is put back
  before the restart, so the writes of that last fraction of a second are lost
  (a SIGKILL alone loses nothing: the kernel keeps what Redis wrote);
* makes the store **unreachable** ``outages`` times for ``outage_s``: Redis is
  paused (SIGSTOP); an SQLite file is held under an exclusive lock.

Restarts and outages are placed by progress (the share of actions the service has
charged), not by the clock: workers spend their first seconds importing, and a
restart before anyone used the store tests nothing.

Nothing here asserts; ``test_chaos_faults.py`` and ``bench/chaos_counts.py`` do.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.chaos.fake_service import ArmedKill, Ledger
from tests.chaos.scenario import ChaosRun, Scenario, _collect, worker_configs
from tests.chaos.worker import StoreLocation, WorkerConfig, run_worker
from tests.redis_server import RedisServer

__all__ = ["FaultRun", "Faults", "run_with_faults"]


@dataclass(frozen=True)
class Faults:
    """Which faults, how often. All off: a run with no chaos from the supervisor."""

    kill_every_s: float | None = None
    # A cap, so the run ends: a replacement re-runs its whole plan, and every charge
    # it commits could otherwise be the next kill.
    max_kills: int = 20
    restarts: int = 0
    outages: int = 0
    outage_s: float = 2.0
    detect_store_loss: bool = True
    power_cut_loses_s: float = 0.5  # under AOF everysec: the writes a restart loses

    @property
    def names(self) -> list[str]:
        return [
            name
            for name, on in (
                ("kills", self.kill_every_s is not None),
                ("restarts", self.restarts > 0),
                ("outages", self.outages > 0),
            )
            if on
        ]


@dataclass
class FaultRun:
    """The evidence of one run, plus what the supervisor did."""

    run: ChaosRun
    kills: int
    restarts: int
    outages: int
    seconds: float
    timeline: list[str] = field(default_factory=list)  # when each restart and outage happened
    workdir: Path = Path()  # where the workers' reports and checkpoints are

    def counts(self) -> dict[str, Any]:
        counts = self.run.counts()
        statuses: dict[str, int] = {}
        store_lost_seen = store_new_seen = 0
        for seen in self.seen():
            store_lost_seen += seen["spans"]["store_lost"]
            store_new_seen += seen["spans"].get("store_new", 0)
            for status, n in seen["statuses"].items():
                statuses[status] = statuses.get(status, 0) + n
        counts.update(
            kills=self.kills,
            restarts=self.restarts,
            outages=self.outages,
            refused_store_unavailable=statuses.get("store_unavailable", 0),
            store_lost_seen=store_lost_seen,
            store_new_seen=store_new_seen,
            unfinished=sum(report["unfinished"] for report in self.run.reports),
            # A worker that died of an error, not of the supervisor's SIGKILL.
            crashed=sum(1 for code in self.run.exitcodes if code not in (0, -signal.SIGKILL)),
            timeline="; ".join(self.timeline),
            seconds=round(self.seconds, 1),
        )
        return counts

    def stuck(self) -> list[str]:
        """For every step a worker left unfinished: who held its key, from the journals.

        Each worker journals its claims (``store-<pid>.jsonl``): an ``in_progress``
        answer names the token holding the key, and the claim that got that token
        names its process. What that process did with the key next says why it kept it.
        """
        journals = {
            int(path.stem.split("-", 1)[1]): [
                json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            ]
            for path in sorted(self.workdir.glob("store-*.jsonl"))
        }
        owner = {
            event["token"]: pid
            for pid, events in journals.items()
            for event in events
            if event["event"] == "claim" and event.get("token")
        }
        reported = {report["pid"] for report in self.run.reports}
        lines = []
        for report in self.run.reports:
            for step in report.get("unfinished_steps", []):
                holders = {
                    event["holder"]
                    for event in journals.get(report["pid"], [])
                    if event["key"] == step["key"] and event.get("holder")
                }
                ended = [
                    f"{o['kind']} {o['status']}"
                    for o in report["outcomes"]
                    if o["order_id"] == step["order_id"]
                ]
                lines.append(
                    f"worker {report['pid']} left {step}; its results for the order {ended}; "
                    f"holders of the key {sorted(holders)}"
                )
                for token in sorted(holders):
                    pid = owner.get(token)
                    state = "reported" if pid in reported else "killed or stuck"
                    events = [e for e in journals.get(pid or -1, []) if e["key"] == step["key"]]
                    lines.append(f"  {token[:8]} claimed by {pid} ({state}): {events[-6:]}")
        return lines

    def seen(self) -> list[dict[str, Any]]:
        """What every worker saw: its report, or for a killed one its last checkpoint."""
        reported = {report["pid"] for report in self.run.reports}
        killed = [
            json.loads(path.read_text(encoding="utf-8"))
            for path in sorted(self.workdir.glob("tally-*.json"))
        ]
        return self.run.reports + [seen for seen in killed if seen["pid"] not in reported]


class _Supervisor:
    def __init__(
        self,
        scenario: Scenario,
        faults: Faults,
        store: StoreLocation,
        workdir: Path,
        redis: RedisServer | None,
    ) -> None:
        self.scenario, self.faults, self.store, self.redis = scenario, faults, store, redis
        self.ledger = Ledger(workdir / "ledger.db")
        self.workdir = workdir
        self.arm = workdir / "arm-kill"
        self.marker = workdir / "killed.pid"
        self.context = multiprocessing.get_context("spawn")
        self.processes: list[Any] = []
        self.configs: dict[int, WorkerConfig] = {}  # pid -> its config
        self.kills = self.restarts = self.outages = 0
        self.generation = 0
        self.started = time.monotonic()
        self.timeline: list[str] = []

    def start(self, config: WorkerConfig) -> None:
        process = self.context.Process(target=run_worker, args=(config,))
        process.start()
        self.processes.append(process)
        self.configs[process.pid] = config

    def run(self, configs: list[WorkerConfig]) -> None:
        for config in configs:
            self.start(config)
        started = self.started = time.monotonic()
        horizon = self.scenario.deadline_s
        # Restarts and outages spread over the middle of the run, by progress.
        restart_at = _spread(self.faults.restarts, 0.2, 0.6)
        outage_at = _spread(self.faults.outages, 0.35, 0.75)
        next_kill = started + (self.faults.kill_every_s or 0.0)
        armed_at: float | None = None
        progress, polled = 0.0, 0.0
        while any(p.is_alive() for p in self.processes):
            now = time.monotonic()
            if (restart_at or outage_at) and now - polled > 0.05:
                progress, polled = self._progress(), now
            if now - started > horizon + 60:
                break
            if self.faults.kill_every_s is not None:
                if self.marker.exists():
                    # Whoever took the arm committed and now blocks: kill it, always
                    # (a victim left alive would renew its lease, and hold its key, forever).
                    self._kill_and_replace()
                    armed_at, next_kill = None, time.monotonic() + self.faults.kill_every_s
                elif armed_at is None and now >= next_kill and self.kills < self.faults.max_kills:
                    self.arm.write_text("kill", encoding="ascii")
                    armed_at = now
                elif armed_at is not None and now - armed_at > 5.0 and self._disarm():
                    armed_at, next_kill = None, now + self.faults.kill_every_s
            if restart_at and progress >= restart_at[0]:
                restart_at.pop(0)
                self._restart_store()
            if outage_at and progress >= outage_at[0]:
                outage_at.pop(0)
                self._outage()
            time.sleep(0.005)
        self.arm.unlink(missing_ok=True)

    def _disarm(self) -> bool:
        """Take the arm back if nobody took it yet (False: a victim is on its way)."""
        try:
            self.arm.unlink()
        except FileNotFoundError:
            return False
        return True

    def _note(self, fault: str) -> None:
        """When a fault happened, for the record: seconds into the run and progress."""
        seconds = time.monotonic() - self.started
        self.timeline.append(f"{fault} at {seconds:.1f} s, {self._progress():.0%} charged")

    def _progress(self) -> float:
        """The share of the actions the service has charged so far."""
        ((charged,),) = self.ledger.rows("charged_orders")
        return int(charged) / self.scenario.actions

    def _kill_and_replace(self) -> None:
        pid = int(self.marker.read_text(encoding="ascii"))
        self.marker.unlink()
        os.kill(pid, signal.SIGKILL)
        (victim,) = [p for p in self.processes if p.pid == pid]
        victim.join(timeout=30)
        self.kills += 1
        self.generation += 1
        config = self.configs[pid]
        self.start(
            replace(
                config,
                report_path=str(self.workdir / f"report-{config.index}-r{self.generation}.json"),
            )
        )

    def _restart_store(self) -> None:
        if self.redis is None:
            return  # an SQLite file has no server to restart
        power_cut = self.redis.persistence == "everysec"
        if power_cut:
            # What the disk holds at the cut: the last fsync, a fraction of a second old.
            self.redis.snapshot_aof(self.workdir / "aof-at-power-cut")
            time.sleep(self.faults.power_cut_loses_s)
        self.redis.kill()
        if power_cut:
            self.redis.restore_aof(self.workdir / "aof-at-power-cut")
        time.sleep(0.3)
        self.redis.restart()
        self.restarts += 1
        self._note("power cut" if power_cut else "restart")

    def _outage(self) -> None:
        if self.redis is not None:
            self.redis.pause()
            time.sleep(self.faults.outage_s)
            self.redis.resume()
        else:
            with sqlite3.connect(self.store.where, timeout=30.0, isolation_level=None) as db:
                db.execute("BEGIN EXCLUSIVE")
                time.sleep(self.faults.outage_s)
                db.execute("ROLLBACK")
        self.outages += 1
        self._note("outage")

    def stop_all(self) -> None:
        for process in self.processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGKILL)
                process.join()
        self.ledger.close()


def _spread(count: int, first: float, last: float) -> list[float]:
    """``count`` progress marks from ``first`` to ``last``."""
    if count <= 1:
        return [first] * count
    step = (last - first) / (count - 1)
    return [first + step * i for i in range(count)]


def run_with_faults(
    scenario: Scenario,
    faults: Faults,
    store: StoreLocation,
    workdir: Path,
    redis: RedisServer | None = None,
) -> FaultRun:
    """Run the plan to its end under ``faults``; ``redis`` is the server behind ``store``."""
    workdir.mkdir(parents=True, exist_ok=True)
    ledger = Ledger.create(workdir / "ledger.db")
    supervisor = _Supervisor(scenario, faults, store, workdir, redis)
    armed = ArmedKill(str(supervisor.arm), str(supervisor.marker))
    configs = worker_configs(
        scenario,
        store,
        ledger,
        workdir,
        armed_kill=armed if faults.kill_every_s is not None else None,
        detect_store_loss=faults.detect_store_loss,
        store_timeout_s=0.5,
    )
    started = time.monotonic()
    try:
        supervisor.run(configs)
    finally:
        supervisor.stop_all()
    seconds = time.monotonic() - started
    killed = supervisor.processes[0]  # _collect wants a process; kills are counted here
    run = _collect(scenario, store, ledger, workdir, killed, None, supervisor.processes)
    return FaultRun(
        run,
        supervisor.kills,
        supervisor.restarts,
        supervisor.outages,
        seconds,
        supervisor.timeline,
        workdir,
    )
