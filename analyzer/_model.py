"""Plain value types returned by the analyzer."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

# How many identical calls with the same answer make a loop, unless told otherwise.
DEFAULT_MIN_REPEATS = 3

# Every finding kind, in the order the docs describe them (docs/analyzer.md).
FINDING_KINDS = (
    "loop",
    "duplicate_write",
    "idempotency_conflict",
    "unsafe_retry",
    "unverified_keyed_retry",
    "key_churn",
    "write_after_unknown",
    "retried_permanent",
    "parallel_write",
)


@dataclass(frozen=True)
class BadLine:
    """A line that was skipped: its file, 1-based line number and why."""

    path: str
    line: int
    reason: str


@dataclass(frozen=True)
class IngestReport:
    """What one ``Analyzer.ingest`` call read and added."""

    files: int
    lines: int
    spans: int
    skipped_files: int
    bad_lines: tuple[BadLine, ...] = ()


@dataclass(frozen=True, init=False)
class Finding:
    """One finding: its ``kind`` is one of ``FINDING_KINDS``; ``detail["explanation"]``
    says in one sentence what went wrong and what the fix is."""

    kind: str
    conversation_id: str
    tool: str | None
    idempotency_key: str | None
    count: int
    span_ids: tuple[str, ...]
    trace_ids: tuple[str, ...]
    first_seen: datetime
    last_seen: datetime
    detail: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        kind: str,
        conversation_id: str,
        tool: str | None,
        idempotency_key: str | None,
        count: int,
        span_ids: tuple[str, ...],
        trace_ids: tuple[str, ...],
        first_seen: datetime,
        last_seen: datetime,
        detail: dict[str, Any] | None = None,
    ) -> None:
        # A report builds tens of thousands, so this replaces the generated
        # frozen ``__init__`` (one ``object.__setattr__`` per field, about half
        # the time of building one): the fields go straight into the instance
        # dict, which attribute assignment cannot reach (``FrozenInstanceError``).
        fields = self.__dict__
        fields["kind"] = kind
        fields["conversation_id"] = conversation_id
        fields["tool"] = tool
        fields["idempotency_key"] = idempotency_key
        fields["count"] = count
        fields["span_ids"] = span_ids
        fields["trace_ids"] = trace_ids
        fields["first_seen"] = first_seen
        fields["last_seen"] = last_seen
        fields["detail"] = {} if detail is None else detail

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON-serialisable dict (times as ISO 8601, UTC)."""
        return {
            "kind": self.kind,
            "conversation_id": self.conversation_id,
            "tool": self.tool,
            "idempotency_key": self.idempotency_key,
            "count": self.count,
            "span_ids": list(self.span_ids),
            "trace_ids": list(self.trace_ids),
            "first_seen": _iso_utc(self.first_seen),
            "last_seen": _iso_utc(self.last_seen),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class QueryResult:
    """The result of ``Analyzer.query``: column names and rows."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


def _iso_utc(moment: datetime) -> str:
    # DuckDB TIMESTAMP values are naive UTC; say so explicitly.
    return moment.isoformat() + ("Z" if moment.tzinfo is None else "")


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building many objects.

    Tens of thousands of findings (tuples, lists, dicts, datetimes), or the
    rows ``serve --clickhouse`` writes, trigger a collection every few hundred
    allocations, each scanning everything built so far: that was half the time
    spent building them. They hold no cycles. Threads may overlap their pauses:
    whichever found the collector enabled turns it back on.

    The collector's generations stay the caller's: freezing and unfreezing to
    promote the findings would promote every young object of the process too.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def finding_from_row(row: Sequence[Any]) -> Finding:
    """A finding from a row of either engine's findings statement: kind,
    conversation, tool, key, count, span ids, trace ids, first and last seen,
    detail as JSON text."""
    kind, conversation, tool, key, count, span_ids, trace_ids, first, last, detail = row
    # Positional: ten keyword arguments cost a third of building a Finding.
    return Finding(
        kind,
        conversation,
        tool,
        key,
        int(count),
        tuple(span_ids),
        tuple(trace_ids),
        _naive_utc(first),
        _naive_utc(last),
        orjson.loads(detail) if detail else {},
    )


def _naive_utc(moment: datetime) -> datetime:
    # Times are naive UTC (DuckDB's TIMESTAMP values are); ClickHouse's come
    # with their time zone.
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


def coverage(
    *, spans: int, calls_by_source: dict[str, int], genai: dict[str, Any], unverifiable: int
) -> dict[str, Any]:
    """The summary's ``coverage`` object (docs/analyzer.md#coverage): what was
    read and what was recognised in it, so that "no findings" can be told from
    "nothing understood". Both engines build it here, from the same figures."""
    return {
        "spans": int(spans),
        "tool_calls": {source: int(calls) for source, calls in calls_by_source.items()},
        "genai_spans": int(genai["genai_spans"]),
        "genai_spans_without_calls": int(genai["genai_spans_without_calls"]),
        "unverifiable_calls": int(unverifiable),
    }


def unrecognised_genai_spans(summary: dict[str, Any]) -> int:
    """How many GenAI-looking spans were read when no tool call was recognised
    in any of them (0 otherwise, and when none was read): a silent zero, where
    "no findings" means the analyzer understood nothing."""
    cover = summary["coverage"]
    if sum(cover["tool_calls"].values()):
        return 0
    return int(cover["genai_spans"])
