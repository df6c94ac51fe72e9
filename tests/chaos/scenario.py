"""The chaos scenario: plan it, run it in OS processes, count what really happened.

Used by ``test_chaos.py`` and by ``bench/chaos_counts.py`` (same scenario,
larger scale). Nothing here asserts; `ChaosRun` holds the evidence and
`ChaosRun.counts` the numbers for the README.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.chaos.fake_service import COMMITTING_FAULTS, KillSwitch, Ledger
from tests.chaos.worker import Step, StoreLocation, WorkerConfig, run_worker

__all__ = ["ChaosRun", "Scenario", "plan", "run_scenario", "worker_configs"]

_MARKER_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Scenario:
    """How much chaos: ``actions`` charges over ``workers`` processes.

    Every ``shared_every``-th action is planned in every worker, at the head
    of each plan, so all workers race for it at once. Each worker then runs
    its own actions shuffled with re-plans of charges it finished (a new
    call id, the same key) and conflicting reuses of their keys (another
    amount). The first shared action is the one whose worker is SIGKILLed.
    """

    honours_keys: bool
    actions: int = 200
    workers: int = 4
    shared_every: int = 5
    replans_per_worker: int = 15
    conflicts_per_worker: int = 3
    lease_s: float = 2.0  # > any one service call (ms), so only the dead worker loses its key
    deadline_s: float = 120.0  # a stuck run fails; a loaded machine (CI on 2 cores) is not stuck
    seed: int = 4

    @property
    def orders(self) -> list[str]:
        return [f"order-{number:04d}" for number in range(self.actions)]

    @property
    def kill_order(self) -> str:
        return self.orders[0]

    def amount(self, order_id: str) -> int:
        return 100 + int(order_id.rsplit("-", 1)[1])


def plan(scenario: Scenario) -> list[tuple[Step, ...]]:
    """The steps of each worker, deterministic for a scenario."""
    rng = random.Random(scenario.seed)
    orders = scenario.orders
    shared = orders[:: scenario.shared_every]
    plans = []
    for worker in range(scenario.workers):
        own = [
            order
            for number, order in enumerate(orders)
            if number % scenario.shared_every and number % scenario.workers == worker
        ]
        tail = [Step("action", order, scenario.amount(order)) for order in own]
        tail += [
            Step("replan", order, scenario.amount(order))
            for order in rng.sample(own, min(scenario.replans_per_worker, len(own)))
        ]
        tail += [
            Step("conflict", order, scenario.amount(order) + 1_000)
            for order in rng.sample(own, min(scenario.conflicts_per_worker, len(own)))
        ]
        rng.shuffle(tail)
        plans.append(tuple(Step("action", order, scenario.amount(order)) for order in shared))
        plans[-1] += tuple(tail)
    return plans


@dataclass
class ChaosRun:
    """The evidence of one run: worker reports and the service's ledger."""

    scenario: Scenario
    store: str
    reports: list[dict[str, Any]]
    charges: dict[str, list[tuple[str, int]]]  # order -> [(charge_id, amount)]
    requests: Counter[tuple[str, str]]  # (kind, fault) -> requests at the service
    charged_amounts: set[tuple[str, int]]  # (order, amount) of every charge request
    killed_pid: int
    kill_order_requests: list[tuple[int, str, int]]  # (attempt, fault, pid) at the service
    killed_exitcode: int | None
    exitcodes: list[int | None] = field(default_factory=list)

    @property
    def outcomes(self) -> list[dict[str, Any]]:
        return [outcome for report in self.reports for outcome in report["outcomes"]]

    def counts(self) -> dict[str, Any]:
        """The numbers for the README table."""
        outcomes = self.outcomes
        per_order = [len(self.charges.get(order, [])) for order in self.scenario.orders]
        statuses: Counter[str] = Counter()
        claims: Counter[str] = Counter()
        for report in self.reports:
            statuses.update(report["statuses"])
            claims.update(report["claims"])
        return {
            "store": self.store,
            "service": "honours keys" if self.scenario.honours_keys else "legacy (no keys)",
            "processes": len(self.exitcodes),
            "actions": self.scenario.actions,
            "tool_calls": sum(statuses.values()),
            "executions": sum(n for (kind, _), n in self.requests.items() if kind == "charge"),
            "committed_then_failed": sum(
                n
                for (kind, fault), n in self.requests.items()
                if kind == "charge" and fault in COMMITTING_FAULTS - {"ok"}
            ),
            # Requests the service committed after the client had timed out.
            "late_commits": self.requests.get(("charge", "late_commit"), 0),
            "side_effects": sum(per_order),
            "duplicates": sum(max(0, n - 1) for n in per_order),
            "lost": sum(1 for n in per_order if n == 0),
            "replays": sum(1 for o in outcomes if o["replayed"]),
            "conflicts_refused": sum(1 for o in outcomes if o["status"] == "idempotency_conflict"),
            "in_progress_seen": statuses["in_progress"],
            "takeovers": claims["takeover"],
            "reconciled": sum(1 for o in outcomes if o["reconciled"]),
            "read_backs": sum(n for (kind, _), n in self.requests.items() if kind == "status"),
        }


def worker_configs(
    scenario: Scenario, store: StoreLocation, ledger: Ledger, workdir: Path, **options: Any
) -> list[WorkerConfig]:
    """One config per planned worker; ``options`` are the run's extra `WorkerConfig` fields."""
    return [
        WorkerConfig(
            index=index,
            steps=steps,
            store=store,
            ledger_path=ledger.path,
            honours_keys=scenario.honours_keys,
            report_path=str(workdir / f"report-{index}.json"),
            lease_s=scenario.lease_s,
            deadline_s=scenario.deadline_s,
            **options,
        )
        for index, steps in enumerate(plan(scenario))
    ]


def run_scenario(scenario: Scenario, store: StoreLocation, workdir: Path) -> ChaosRun:
    """Run every worker to the end, SIGKILLing the one that commits the kill order first."""
    workdir.mkdir(parents=True, exist_ok=True)
    ledger = Ledger.create(workdir / "ledger.db")
    marker = workdir / "committed-then-blocked.pid"
    configs = worker_configs(
        scenario, store, ledger, workdir, kill_switch=KillSwitch(scenario.kill_order, str(marker))
    )
    context = multiprocessing.get_context("spawn")
    gate = context.Barrier(len(configs) + 1)
    processes = [context.Process(target=run_worker, args=(c, gate)) for c in configs]
    try:
        for process in processes:
            process.start()
        gate.wait(timeout=120)
        killed, exitcode = _kill_blocked_worker(processes, marker)
        # A supervisor restarts the dead worker: a fresh process with the same plan.
        victim = configs[processes.index(killed)]
        replacement_config = _replacement(victim, workdir)
        replacement = context.Process(target=run_worker, args=(replacement_config,))
        replacement.start()
        processes.append(replacement)
        for process in processes:
            process.join(timeout=scenario.deadline_s + 60)
    finally:
        for process in processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGKILL)
                process.join()
    return _collect(scenario, store, ledger, workdir, killed, exitcode, processes)


def _kill_blocked_worker(processes: list[Any], marker: Path) -> tuple[Any, int | None]:
    """Wait until the service committed the kill order's charge, then SIGKILL its worker."""
    deadline = time.monotonic() + _MARKER_TIMEOUT_S
    while not marker.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("no worker reached the charge that is to be killed")
        time.sleep(0.005)
    pid = int(marker.read_text(encoding="ascii"))
    (victim,) = [process for process in processes if process.pid == pid]
    os.kill(pid, signal.SIGKILL)
    victim.join(timeout=30)
    return victim, victim.exitcode


def _replacement(victim: WorkerConfig, workdir: Path) -> WorkerConfig:
    # The same plan, its own report, and no kill switch: it is not killed again.
    return replace(
        victim,
        report_path=str(workdir / f"report-{victim.index}-replacement.json"),
        kill_switch=None,
    )


def _collect(
    scenario: Scenario,
    store: StoreLocation,
    ledger: Ledger,
    workdir: Path,
    killed: Any,
    exitcode: int | None,
    processes: list[Any],
) -> ChaosRun:
    reports = [
        json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(workdir.glob("report-*.json"))
    ]
    charges: dict[str, list[tuple[str, int]]] = {}
    for charge_id, order_id, amount in ledger.rows("charges"):
        charges.setdefault(order_id, []).append((charge_id, amount))
    requests = Counter({(kind, fault): n for kind, fault, n in ledger.rows("requests_by_fault")})
    amounts = {(order, amount) for order, amount in ledger.rows("charge_request_amounts")}
    kill_order_requests = [
        (int(attempt), str(fault), int(pid))
        for attempt, fault, pid in ledger.rows(
            "charge_requests_of_order", order_id=scenario.kill_order
        )
    ]
    ledger.close()
    return ChaosRun(
        scenario=scenario,
        store=store.backend,
        reports=reports,
        charges=charges,
        requests=requests,
        charged_amounts=amounts,
        killed_pid=killed.pid,
        kill_order_requests=kill_order_requests,
        killed_exitcode=exitcode,
        exitcodes=[process.exitcode for process in processes],
    )
