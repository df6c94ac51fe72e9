"""The continuous analyser: keeps a DuckDB file current from the spool.

It seals the spool's open segment, hands the sealed segments to the
analyzer's own ingest (``Analyzer.ingest``), and starts again. A sealed
segment never changes, so the analyzer's record of the files it ingested
(path, size, modification time, committed with the spans) is the durable
position in the spool: after a crash or restart the same ingest skips what is
done and reads the rest, and every span is counted once (spans are also
unique by trace and span id).

After each ingest that added spans it diffs the findings against those known
(for alerts and the dashboard's "new" marks) and, when the dashboard runs,
publishes a copy of the database for it to open read-only: DuckDB lets one
process write a file, and none read it meanwhile.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from ..analyzer import Analyzer, AnalyzerError, Finding
from ._spool import Spool

__all__ = ["LiveAnalyser", "finding_key", "read_status"]

STATUS_FILE = "status"
_RATE_WINDOW_S = 10.0
_KEPT_SNAPSHOTS = 3
_RECENT_FINDINGS = 200
_SEAL_BYTES = 8 * 1024 * 1024

FindingKey = tuple[str, str, str | None, str | None]
Listener = Callable[[list[Finding]], None]


def finding_key(finding: Finding) -> FindingKey:
    """What makes a finding the same one as it grows (a loop gains calls)."""
    return (finding.kind, finding.conversation_id, finding.tool, finding.idempotency_key)


def read_status(directory: Path) -> dict[str, Any] | None:
    """The live status the analyser publishes for the dashboard, or None."""
    try:
        value = orjson.loads((directory / STATUS_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


class LiveAnalyser:
    """A thread that ingests the spool into ``db_path`` as it grows."""

    def __init__(
        self,
        spool: Spool,
        db_path: Path,
        *,
        snapshots: Path | None = None,
        listeners: Sequence[Listener] = (),
        write_tools: Sequence[str] = (),
        interval_s: float = 0.2,
        seal_age_s: float = 0.5,
        clock: Callable[[], float] = time.time,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self._spool = spool
        self._db_path = db_path
        self._snapshots = snapshots
        self._listeners = list(listeners)
        self._write_tools = list(write_tools)
        self._interval_s = interval_s
        self._clock = clock
        self._log = log or _stderr
        self._lock = threading.Lock()  # the DuckDB connection: one user at a time
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._analyzer: Analyzer | None = None
        self._next = 0  # sealed segments before this index are ingested
        self._version = 0  # ingests so far: the API's cached answers name theirs
        self._summary_cache: tuple[int, dict[str, Any]] | None = None
        self._findings_cache: tuple[int, list[Finding]] | None = None
        self._seal_age_s = seal_age_s
        self._known: set[FindingKey] | None = None
        self._recent: deque[dict[str, Any]] = deque(maxlen=_RECENT_FINDINGS)
        self._ingested: deque[tuple[float, int]] = deque()
        self._last_ingest: float | None = None
        self._spans = 0
        self._snapshot_number = 0
        self._next_snapshot = 0.0
        self._unpublished = False  # ingested data the dashboard's copy lacks
        self._logged = False  # commits in the write-ahead log since the last checkpoint
        self.error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> LiveAnalyser:
        """Open the database (raises if it cannot) and start following the spool."""
        self.open()
        self._thread = threading.Thread(target=self._run, name="toolspan-analyse", daemon=True)
        self._thread.start()
        return self

    def open(self) -> LiveAnalyser:
        """Open the database and publish the first copy; :meth:`cycle` then
        runs one pass (``start`` runs them on a thread)."""
        self._analyzer = Analyzer(self._db_path)
        # A checkpoint per pass cost 30% of the ingest: the analyser
        # checkpoints when it is idle (or publishes a copy) instead.
        self._analyzer.defer_checkpoints()
        if self._write_tools:
            self._analyzer.set_write_tools(self._write_tools)
        if self._snapshots is not None:
            self._snapshots.mkdir(parents=True, exist_ok=True)
            self._publish(force=True)  # the dashboard opens a copy from its start
        return self

    def stop(self) -> None:
        """Ingest what is sealed, then close the database."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._analyzer is not None:
            with self._lock:
                self._analyzer.close()
            self._analyzer = None

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether the first pass over the spool (what a restart resumes) is done."""
        return self._ready.wait(timeout_s)

    def _run(self) -> None:
        while True:
            stopping = self._stop.is_set()
            try:
                worked = self.cycle()
            except (AnalyzerError, OSError) as exc:
                # Reported, and tried again: a full disk may free up.
                self._log(f"analysing the spool failed: {exc}")
                self.error, worked = exc, False
            self._ready.set()
            if stopping:
                return
            if not worked:
                self._checkpoint_when_idle()
                self._stop.wait(self._interval_s)

    def _checkpoint_when_idle(self) -> None:
        """Merge the write-ahead log into the file while nothing waits: a
        restart then replays little."""
        if not self._logged or self._analyzer is None:
            return
        try:
            with self._lock:
                self._analyzer.checkpoint()
            self._logged = False
        except AnalyzerError as exc:
            self._log(f"checkpointing the database failed: {exc}")

    # -- one pass --------------------------------------------------------------

    def cycle(self) -> bool:
        """Seal, ingest what is new, diff the findings, publish; whether it
        found anything to ingest."""
        assert self._analyzer is not None
        # One segment a second at most under load: fewer, larger files (and
        # batches) at the cost of up to a second of latency.
        self._spool.seal(min_age_s=self._seal_age_s, min_bytes=_SEAL_BYTES)
        sealed = self._spool.sealed()
        todo = sealed[self._next :]
        if not todo:
            if self._known is None:
                self._diff_findings(self._clock())  # the baseline: nothing was read yet
            self._publish(force=False)
            return False
        self._spool.set_backlog(sum(_size(path) for path in todo))
        with self._lock:
            report = self._analyzer.ingest(todo)
            self._version += 1
            self._logged = True
        for bad in report.bad_lines[:10]:
            self._log(f"{bad.path}:{bad.line}: skipped: {bad.reason}")
        self._next = len(sealed)
        self._spool.set_backlog(0)
        now = self._clock()
        if report.spans:
            self._spans += report.spans
            self._last_ingest = now
            self._ingested.append((now, report.spans))
        if report.spans or self._known is None:
            self._diff_findings(now)
        self._publish(force=bool(report.spans))
        return True

    def _diff_findings(self, now: float) -> None:
        findings = self._current_findings()
        first_pass = self._known is None
        known = self._known or set()
        new = [f for f in findings if finding_key(f) not in known]
        self._known = known | {finding_key(f) for f in new}
        if first_pass:
            # Findings of an earlier run were reported then: only new ones are news.
            return
        seen_at = datetime.fromtimestamp(now, UTC).isoformat()
        for finding in new:
            self._recent.append(_brief(finding, seen_at))
        if new:
            for listener in self._listeners:
                listener(new)

    # -- what the API and the dashboard read ----------------------------------

    # The API's answers are computed once per ingest, not per request: a
    # client polling them must not hold the database away from the ingest.

    def _current_findings(self) -> list[Finding]:
        assert self._analyzer is not None
        with self._lock:
            version = self._version
            cached = self._findings_cache
            if cached is not None and cached[0] == version:
                return cached[1]
            found = self._analyzer.findings()
            self._findings_cache = (version, found)
            return found

    def summary(self) -> dict[str, Any]:
        """``toolspan analyze --format json``'s summary, with the live figures."""
        assert self._analyzer is not None
        with self._lock:
            cached = self._summary_cache
            if cached is None or cached[0] != self._version:
                cached = (self._version, self._analyzer.summary())
                self._summary_cache = cached
        return {"summary": cached[1], **self.live_figures()}

    def findings(self, since: datetime | None = None) -> list[dict[str, Any]]:
        """The findings (as ``toolspan analyze --format json``), or those seen
        again at or after ``since``."""
        found = self._current_findings()
        if since is not None:
            # DuckDB times are naive UTC.
            cut = since.astimezone(UTC).replace(tzinfo=None) if since.tzinfo else since
            found = [f for f in found if f.last_seen >= cut]
        return [f.to_json() for f in found]

    def live_figures(self) -> dict[str, Any]:
        """When data last arrived, spans ingested, and the recent rate."""
        now = self._clock()
        while self._ingested and self._ingested[0][0] < now - _RATE_WINDOW_S:
            self._ingested.popleft()
        rate = sum(spans for _, spans in self._ingested) / _RATE_WINDOW_S
        last = self._last_ingest
        return {
            "last_ingest": datetime.fromtimestamp(last, UTC).isoformat() if last else None,
            "spans_ingested": self._spans,
            "spans_per_s": round(rate, 1),
            "lag_bytes": self._spool.lag_bytes(),
        }

    def _publish(self, *, force: bool) -> None:
        """A fresh copy of the database for the dashboard, at most so often.

        ``force`` (new data) is remembered when the interval defers it: the
        next pass publishes, even if nothing more arrives (else the last
        ingest of a burst would never reach the dashboard)."""
        if self._snapshots is None:
            return
        self._unpublished = self._unpublished or force or self._snapshot_number == 0
        now = self._clock()
        if not self._unpublished or now < self._next_snapshot:
            return
        self._unpublished = False
        assert self._analyzer is not None
        started = self._clock()
        with self._lock:
            self._analyzer.checkpoint()
            self._logged = False
            self._snapshot_number += 1
            target = self._snapshots / f"snapshot-{self._snapshot_number:08d}.duckdb"
            partial = target.with_suffix(".partial")
            shutil.copyfile(self._db_path, partial)
        partial.replace(target)
        spent = self._clock() - started
        # A big database is copied less often: at most a fifth of the time copying.
        self._next_snapshot = now + max(1.0, 5 * spent)
        status = {
            "snapshot": target.name,
            "version": self._snapshot_number,
            **self.live_figures(),
            "new_findings": list(self._recent),
        }
        _write_atomically(self._snapshots / STATUS_FILE, orjson.dumps(status))
        for old in sorted(self._snapshots.glob("snapshot-*.duckdb"))[:-_KEPT_SNAPSHOTS]:
            old.unlink(missing_ok=True)


def _brief(finding: Finding, seen_at: str) -> dict[str, Any]:
    return {
        "kind": finding.kind,
        "tool": finding.tool,
        "conversation_id": finding.conversation_id,
        "trace_id": finding.trace_ids[0] if finding.trace_ids else None,
        "explanation": str(finding.detail.get("explanation", "")),
        "seen_at": seen_at,
    }


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    partial.replace(path)


def _stderr(message: str) -> None:
    print(f"toolspan serve: {message}", file=sys.stderr, flush=True)
