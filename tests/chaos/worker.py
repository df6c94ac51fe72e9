"""One chaos worker process: executes its plan of charges through toolspan.

Each worker has its own executor, its own connection to the shared store
(SQLite file or Redis) and its own OpenTelemetry SDK with an in-memory
exporter. Retryable results (another worker holds the key, every attempt
failed, ...) go back to the end of the worker's queue, as an agent runtime
would reschedule them. At the end the worker writes a JSON report: the final
outcome of every step, every result status it saw, and what its call spans
say, so the parent can check the trace against the results.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.chaos.fake_service import (
    IN_FLIGHT_S,
    LATE_COMMIT_S,
    ArmedKill,
    KillSwitch,
    Ledger,
    LedgerService,
)
from toolspan.tracer import (
    Executor,
    RetryPolicy,
    Safeguards,
    Tool,
    ToolCall,
    ToolResult,
    current_call,
)
from toolspan.tracer.store import Claim, SQLiteStore, derive_key
from toolspan.tracer.store._base import CheckedStore

__all__ = ["RESCHEDULED", "Step", "StoreLocation", "WorkerConfig", "action_key", "run_worker"]

StepKind = Literal["action", "replan", "conflict"]
# Results a worker reschedules; every other status is final.
RESCHEDULED = frozenset(
    {"in_progress", "attempt_limit", "wait_budget", "deadline_exceeded", "store_unavailable"}
)
CHARGE_PARAMETERS = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer"}},
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Step:
    """One tool call to make: a charge, a re-plan of a done charge, or a conflicting reuse."""

    kind: StepKind
    order_id: str
    amount: int


@dataclass(frozen=True)
class StoreLocation:
    backend: Literal["sqlite", "redis"]
    where: str  # the SQLite path or the Redis URL
    prefix: str = "toolspan:"


@dataclass(frozen=True)
class WorkerConfig:
    index: int
    steps: tuple[Step, ...]
    store: StoreLocation
    ledger_path: str
    honours_keys: bool
    report_path: str
    lease_s: float
    deadline_s: float
    kill_switch: KillSwitch | None = None
    retry_pause_s: float = 0.02
    armed_kill: ArmedKill | None = None
    detect_store_loss: bool = True
    store_timeout_s: float = 2.0  # Redis commands, SQLite busy wait: an outage fails fast


def action_key(order_id: str) -> str:
    """One key per logical action: the charge step of the order's request."""
    return derive_key(f"req-{order_id}", "charge")


class _ClaimLog:
    """Remembers the outcome of the last claim a store answered, and journals claims.

    The journal (``store-<pid>.jsonl`` next to the report, when a path is set) has one
    line per claim and lease renewal: the token each claim got, and for an
    ``in_progress`` answer the token holding the key. It survives a SIGKILL, so a
    key stuck in flight can be traced to the process that holds it.
    """

    last: str | None = None
    journal: Path | None = None
    _journal_lock = threading.Lock()

    def claim(self, key: str, fingerprint: str, *, lease_s: float, ttl_s: float) -> Claim:
        claimed: Claim = super().claim(key, fingerprint, lease_s=lease_s, ttl_s=ttl_s)  # type: ignore[misc]
        self.last = claimed.outcome
        holder = self._holder(key) if claimed.outcome == "in_progress" else None
        self._note(
            "claim",
            key,
            outcome=claimed.outcome,
            token=claimed.token,
            fp=fingerprint[:8],
            holder=holder,
        )
        return claimed

    def extend(self, key: str, token: str, *, lease_s: float) -> bool:
        renewed: bool = super().extend(key, token, lease_s=lease_s)  # type: ignore[misc]
        self._note("extend", key, token=token, renewed=renewed)
        return renewed

    def _holder(self, key: str) -> str | None:
        return None

    def _note(self, event: str, key: str, **fields: Any) -> None:
        if self.journal is None:
            return
        line = json.dumps({"t": round(time.time(), 3), "event": event, "key": key[:12], **fields})
        with self._journal_lock, self.journal.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


class _LoggedSQLiteStore(_ClaimLog, SQLiteStore):
    def _holder(self, key: str) -> str | None:
        with self._critical():
            record = self._load_record(key)
        return None if record is None else record.token


def open_store(
    location: StoreLocation, timeout_s: float = 2.0, journal: Path | None = None
) -> CheckedStore:
    store: _ClaimLog
    if location.backend == "sqlite":
        store = _LoggedSQLiteStore(location.where)  # waits out a held lock (30 s busy timeout)
    else:
        import redis

        from toolspan.tracer.store import RedisStore

        class _LoggedRedisStore(_ClaimLog, RedisStore):
            def _holder(self, key: str) -> str | None:
                try:
                    return _text(self._client.hget(self._record_key(key), "token"))
                except redis.RedisError:  # the store went away meanwhile: no evidence
                    return None

        store = _LoggedRedisStore(location.where, prefix=location.prefix, timeout_s=timeout_s)
    store.journal = journal
    assert isinstance(store, CheckedStore)
    return store


def _text(value: Any) -> str | None:
    return None if value is None else bytes(value).decode()


def charge_tool(service: LedgerService, *, honours_keys: bool) -> Tool:
    """The charge tool as an agent would declare it for this service."""

    def charge(order_id: str, amount: int) -> dict[str, Any]:
        call = current_call()
        # Forwarded as an Idempotency-Key header; the legacy API ignores it.
        return service.charge(order_id, amount, call.idempotency_key if call else None)

    def charge_status(order_id: str, amount: int) -> dict[str, Any] | None:
        return service.charge_status(order_id)

    return Tool(
        "charge",
        charge,
        side_effect="write",
        idempotent=honours_keys,
        key_passed="Idempotency-Key, from current_call()" if honours_keys else None,
        read_back=None if honours_keys else charge_status,
        parameters=CHARGE_PARAMETERS,
        # A request waits for the ledger and commits within IN_FLIGHT_S; a timed-out
        # one may commit up to LATE_COMMIT_S after the client gave up, plus that wait.
        attempt_timeout_s=IN_FLIGHT_S,
        commit_window_s=LATE_COMMIT_S + IN_FLIGHT_S,
    )


@dataclass
class _Tally:
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)  # every result, final or not
    claims: Counter[str] = field(default_factory=Counter)
    unfinished: int = 0
    unfinished_steps: list[dict[str, Any]] = field(default_factory=list)


def run_worker(config: WorkerConfig, start_gate: Any = None) -> None:
    """Process entry point (``spawn``): run the plan, then write the report."""
    journal = Path(config.report_path).with_name(f"store-{os.getpid()}.jsonl")
    store = open_store(config.store, config.store_timeout_s, journal)
    ledger = Ledger(config.ledger_path)
    service = LedgerService(
        ledger,
        honours_keys=config.honours_keys,
        kill_switch=config.kill_switch,
        armed_kill=config.armed_kill,
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guards = Safeguards(
        store=store,
        lease_s=config.lease_s,
        max_attempts_per_action=None,  # the turn budget is not what this test is about
        # Four workers share one conversation per order here, so the loop guard
        # would (rightly) refuse the 4th identical replay: not this test's subject.
        loop_threshold=None,
        detect_store_loss=config.detect_store_loss,
    )
    executor = Executor(
        [charge_tool(service, honours_keys=config.honours_keys)],
        safeguards=guards,
        policy=RetryPolicy(base_delay_s=0, max_delay_s=0, jitter=0),
        tracer_provider=provider,
        sleep=lambda _seconds: None,
        rng=random.Random(config.index),
    )
    if start_gate is not None:
        start_gate.wait(timeout=120)  # every worker starts at once, so shared actions race
    tally = _work(config, executor, store, _Checkpoint(config, exporter))
    report = {
        "index": config.index,
        "pid": os.getpid(),
        "outcomes": tally.outcomes,
        "statuses": dict(tally.statuses),
        "claims": dict(tally.claims),
        "spans": _span_summary(exporter.get_finished_spans()),
        "unfinished": tally.unfinished,
        "unfinished_steps": tally.unfinished_steps,
    }
    staged = f"{config.report_path}.tmp"
    Path(staged).write_text(json.dumps(report), encoding="utf-8")
    Path(staged).replace(config.report_path)
    provider.shutdown()
    store.close()
    ledger.close()


class _Checkpoint:
    """Writes what this worker saw so far to ``tally-<pid>.json``, twice a second.

    A SIGKILLed worker writes no report; its checkpoint keeps the statuses and span
    counts it saw (refusals during an outage, calls that saw a store loss) from
    vanishing with it. The final report supersedes it.
    """

    def __init__(self, config: WorkerConfig, exporter: InMemorySpanExporter) -> None:
        self.path = Path(config.report_path).with_name(f"tally-{os.getpid()}.json")
        self.exporter = exporter
        self.due = 0.0

    def __call__(self, tally: _Tally) -> None:
        now = time.monotonic()
        if now < self.due:
            return
        self.due = now + 0.5
        seen = {
            "pid": os.getpid(),
            "statuses": dict(tally.statuses),
            "spans": _span_summary(self.exporter.get_finished_spans()),
        }
        staged = self.path.with_suffix(".tmp")
        staged.write_text(json.dumps(seen), encoding="utf-8")
        staged.replace(self.path)


def _work(
    config: WorkerConfig,
    executor: Executor,
    store: CheckedStore,
    checkpoint: Callable[[_Tally], None] = lambda _tally: None,
) -> _Tally:
    tally = _Tally()
    queue: deque[tuple[float, Step]] = deque((0.0, step) for step in config.steps)
    done: set[str] = set()
    deadline = time.monotonic() + config.deadline_s
    seq = 0
    while queue and time.monotonic() < deadline:
        not_before, step = queue.popleft()
        pause = not_before - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        if step.kind != "action" and step.order_id not in done:
            # Re-plans and conflicting reuses are of charges this worker finished.
            queue.append((time.monotonic() + config.retry_pause_s, step))
            continue
        seq += 1
        call_id = f"w{config.index}-{os.getpid()}-{seq}"
        result, claim = _execute(config, executor, store, step, call_id)
        tally.statuses[result.status] += 1
        tally.claims[claim or "none"] += 1
        checkpoint(tally)
        if result.status in RESCHEDULED:
            pause = max(config.retry_pause_s, result.retry_after_s or 0.0)
            queue.append((time.monotonic() + pause, step))
            continue
        if result.error_code == "unknown_outcome" and result.retry_after_s is not None:
            # The request may still commit: check again once it no longer can (`next`).
            queue.append((time.monotonic() + result.retry_after_s, step))
            continue
        tally.outcomes.append(_outcome(step, result, claim))
        if step.kind == "action" and result.ok:
            done.add(step.order_id)
    tally.unfinished = len(queue)
    tally.unfinished_steps = [
        {**asdict(step), "key": action_key(step.order_id)[:12]} for _, step in queue
    ]
    return tally


def _execute(
    config: WorkerConfig, executor: Executor, store: CheckedStore, step: Step, call_id: str
) -> tuple[ToolResult, str | None]:
    assert isinstance(store, _ClaimLog)
    store.last = None
    result = executor.execute(
        ToolCall(
            "charge",
            call_id,  # a new tool-call id every time, as a model re-planning would send
            {"order_id": step.order_id, "amount": step.amount},
            conversation_id=f"conv-{step.order_id}",
            request_id=f"req-{step.order_id}",
            turn_id=f"turn-{config.index}",
            idempotency_key=action_key(step.order_id),
        )
    )
    return result, store.last


def _outcome(step: Step, result: ToolResult, claim: str | None) -> dict[str, Any]:
    data = result.data if isinstance(result.data, dict) else {}
    return {
        **asdict(step),
        "call_id": result.call_id,
        "claim": claim,
        "status": result.status,
        "error_code": result.error_code,
        "replayed": result.replayed,
        "reconciled": result.reconciled,
        "attempts": result.attempts,
        "charge_id": data.get("charge_id"),
        "charged_amount": data.get("amount"),
    }


def _span_summary(spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    """What the trace says, to compare with what the results say."""
    calls = [dict(s.attributes or {}) for s in spans if s.name.startswith("execute_tool ")]
    return {
        "attempt_spans": sum(1 for s in spans if s.name.startswith("attempt ")),
        "statuses": dict(Counter(str(a.get("toolspan.status")) for a in calls)),
        "replayed": sum(1 for a in calls if a.get("toolspan.idempotency.replayed")),
        "reconciled": sum(1 for a in calls if a.get("toolspan.reconciled")),
        "store_lost": sum(1 for a in calls if a.get("toolspan.store.lost")),
        "store_new": sum(1 for a in calls if a.get("toolspan.store.new")),
        "read_back": {
            str(a["gen_ai.tool.call.id"]): str(a["toolspan.read_back"])
            for a in calls
            if "toolspan.read_back" in a
        },
    }
