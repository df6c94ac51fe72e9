"""The dashboard on a ClickHouse source: the OpenTelemetry Collector's
``otel_traces`` on a server (``clickhouse://``, ``clickhouses://``) or in an
embedded chDB directory (``chdb:PATH``).

The analysis' tables are built once, in one guarded session owned by the app's
process (``toolspan.analyzer._clickhouse_session``: chDB runs one engine per
process, so the Streamlit server holds it and runs every query through it).
Page queries are the statement ``NAME`` of ``sql/clickhouse_NAME.sql`` (beside
the DuckDB ``sql/NAME.sql``, through the one loader) with the filter macros of
``sql/clickhouse_macros.sql`` pasted in; the SQL console runs the user's SQL in
the same session after :func:`check_statement`. No Streamlit here.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from string import Template
from typing import Any

import orjson
import pandas as pd

from .._sql import load_statements
from ..analyzer._clickhouse import DEFAULT_TABLE, parse_source, parse_time, statements
from ..analyzer._clickhouse_session import ClickHouseSession, SessionLimits
from ..analyzer._errors import AnalyzerError
from ..analyzer._model import coverage
from ._errors import (
    DashboardError,
    QueryFailed,
    QueryMemoryExceeded,
    QueryRefused,
    QueryTimeout,
)
from ._sandbox import SandboxLimits, SandboxResult

__all__ = [
    "ClickHouseDatabase",
    "ClickHouseSandbox",
    "SourceSpec",
    "check_statement",
    "load_sql",
]

# The macros every page query may paste in, by placeholder.
_MACROS = ("filtered_calls", "filtered_findings", "spans_of_trace")
_TABLES = ("tool_calls", "attempts", "conversations", "findings")


@dataclass(frozen=True)
class SourceSpec:
    """What ``toolspan dashboard --source`` hands the app: the source and its options."""

    source: str
    table: str = DEFAULT_TABLE
    since: str | None = None
    until: str | None = None
    write_tools: tuple[str, ...] = ()
    # How often the app looks for spans that arrived (and then builds the
    # analysis again); 0: never, the analysis stays as opened.
    follow_s: float = 10.0

    def to_env(self) -> str:
        return orjson.dumps(asdict(self)).decode()

    @classmethod
    def from_env(cls, text: str) -> SourceSpec:
        value = orjson.loads(text)
        value["write_tools"] = tuple(value.get("write_tools") or ())
        return cls(**value)

    def display(self) -> str:
        """The source without credentials."""
        try:
            return f"{parse_source(self.source).display()} table {self.table}"
        except AnalyzerError:
            return "a ClickHouse source"


def load_sql(name: str, layout: str = "map") -> str:
    """The ClickHouse page query ``name`` with its macros pasted in, for the
    exporter's table ``layout`` ("map" or "json"); ``$source`` and ``$range``
    are left for the session to fill."""
    macros = load_statements(__package__, "sql/clickhouse_macros.sql")
    sql = load_statements(__package__, f"sql/clickhouse_{name}.sql")[name]
    # The filter condition is pasted into the macros first, then everything into the query.
    condition = {"call_filter": macros["call_filter"]}
    pasted = {macro: Template(macros[macro]).safe_substitute(condition) for macro in _MACROS}
    pasted.update(condition)
    attributes = macros[f"{layout}_attributes"]
    return Template(sql).substitute(pasted, attributes=attributes, source="$source", range="$range")


def _session_tables() -> dict[str, str]:
    """The pages' own tables, built with the session: the spans that carry
    toolspan.service (the overview's per-service chart would scan the
    collector's table on each draw)."""
    macros = load_statements(__package__, "sql/clickhouse_macros.sql")
    return {"_toolspan_call_services": macros["call_services"]}


# A following dashboard waits this many times its last build between looks.
_BUILD_SHARE = 3.0


def _limits(limits: SandboxLimits) -> SessionLimits:
    return SessionLimits(
        timeout_s=max(1, math.ceil(limits.time_limit_s)),
        max_memory_bytes=limits.max_process_mb * 1024 * 1024,
        max_rows=limits.max_rows,
        max_result_bytes=limits.max_result_bytes,
    )


class ClickHouseDatabase:
    """The app's one guarded session on a ClickHouse source, following it.

    The analysis is built once per session (seconds on millions of spans).
    :meth:`refresh` follows the source: when rows arrived since it was built
    (looked up at most every ``spec.follow_s``), it builds the analysis again
    in a new session and swaps it in; ``generation`` counts the swaps, so
    that cached page results go with the analysis they came from. A relative
    ``--since`` (``24h``) moves with each build."""

    engine = "ClickHouse"

    def __init__(
        self,
        spec: SourceSpec,
        limits: SandboxLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.limits = limits or SandboxLimits()
        self._clock = clock
        self._refreshing = threading.Lock()
        self.generation = 0
        self.build_s = 0.0  # how long the last build took (set by _open_session)
        self.session = self._open_session()
        self.built_at = self._checked = clock()
        self.source_rows = self._source_rows()

    def _open_session(self) -> ClickHouseSession:
        spec = self.spec
        started = time.perf_counter()
        try:
            since = parse_time(spec.since) if spec.since else None
            until = parse_time(spec.until) if spec.until else None
            session = ClickHouseSession(
                spec.source,
                table=spec.table,
                since=since,
                until=until,
                write_tools=spec.write_tools,
                limits=_limits(self.limits),
                extra_tables=_session_tables(),
            )
        except AnalyzerError as exc:  # messages already without credentials
            raise DashboardError(f"cannot open {spec.display()}: {exc}") from None
        self.build_s = time.perf_counter() - started
        return session

    def _source_rows(self) -> int:
        """The rows of the collector's table: a count ClickHouse keeps per part."""
        try:
            result = self.session.read(self.session.render("SELECT count() FROM $source"))
        except AnalyzerError as exc:
            raise DashboardError(f"cannot read {self.spec.display()}: {exc}") from None
        return int(result.rows[0][0])

    def refresh(self) -> bool:
        """Build the analysis again if spans arrived since the last build and
        ``follow_s`` has passed since the last look; True when it did. One
        page builds while the others go on reading the current analysis."""
        if self.spec.follow_s <= 0 or not self._refreshing.acquire(blocking=False):
            return False
        try:
            if self._clock() - self._checked < self.follow_interval_s():
                return False
            self._checked = self._clock()  # a look that fails waits its turn too
            rows = self._source_rows()
            if rows == self.source_rows:
                return False
            fresh = self._open_session()
            stale, self.session = self.session, fresh
            self.source_rows, self.generation = rows, self.generation + 1
            self.built_at = self._checked = self._clock()
            stale.close()  # waits for a read still running on it
            return True
        finally:
            self._refreshing.release()

    def follow_interval_s(self) -> float:
        """Seconds between looks: ``follow_s``, and at least three times the
        last build, so that a dashboard on a busy table spends at most a
        quarter of its time (and of the server's) building."""
        return max(self.spec.follow_s, _BUILD_SHARE * self.build_s)

    def age_s(self) -> float:
        """Seconds since the analysis was built."""
        return self._clock() - self.built_at

    def close(self) -> None:
        self.session.close()

    def tables(self) -> tuple[str, ...]:
        """What the console reads: the analysis' tables and the collector's table."""
        return (*_TABLES, self.session.table)

    def run_query(self, name: str, params: Mapping[str, Any]) -> pd.DataFrame:
        """Run the page query ``name`` with ``params`` and return its rows."""
        sql = self.session.render(load_sql(name, self.session.layout))
        given = {**self.session.parameters(), **params}
        used = {key: _value(value) for key, value in given.items() if "{" + key + ":" in sql}
        try:
            result = self.session.read(sql, used)
            columns = list(result.columns)
            if not result.rows and not columns:
                # No rows, no block: the names come from the query's description.
                columns = [row[0] for row in self.session.read(f"DESCRIBE ({sql})", used).rows]
        except AnalyzerError as exc:
            raise DashboardError(f"Query {name} failed: {exc}") from None
        return pd.DataFrame.from_records(result.rows, columns=columns)

    def coverage(self) -> dict[str, Any]:
        """The analyzer's coverage of the source (docs/analyzer.md#coverage), from
        its own statements, read in this session under its guards."""
        queries = statements("clickhouse_summary")
        try:
            spans = self._row(queries["spans"])["spans"]
            unverifiable = self._row(queries["totals"])["unverifiable"]
            genai = self._row(queries["genai_spans"])
            by_source = self.session.read(self.session.render(queries["calls_by_source"])).rows
        except AnalyzerError as exc:
            raise DashboardError(f"Query coverage failed: {exc}") from None
        return coverage(
            spans=spans,
            calls_by_source={str(source): int(calls) for source, calls in by_source},
            genai=genai,
            unverifiable=unverifiable,
        )

    def _row(self, sql: str) -> dict[str, Any]:
        rendered = self.session.render(sql)
        given = self.session.parameters()
        used = {key: _value(value) for key, value in given.items() if "{" + key + ":" in rendered}
        result = self.session.read(rendered, used)
        return dict(zip(result.columns, result.rows[0], strict=True))


def _value(value: Any) -> Any:
    """A page parameter as ClickHouse binds it: times as naive UTC text,
    widths in microseconds, lists as arrays of names."""
    if isinstance(value, datetime):
        moment = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, pd.Timestamp):
        return _value(value.to_pydatetime())
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    return value


# -- the SQL console ---------------------------------------------------------------

_READS = "SELECT, WITH, SHOW, DESCRIBE, EXISTS, EXPLAIN of those"
_FIRST_WORDS = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXISTS", "EXPLAIN"}
# EXPLAIN's kinds and options before the statement it explains.
_EXPLAIN_KINDS = {"AST", "SYNTAX", "QUERY", "TREE", "PLAN", "PIPELINE", "ESTIMATE", "INDEXES"}
# Comments and string literals (heredocs too: $$...$$) are skipped as one
# token each, so a word inside them is never taken for a keyword or a
# function; a quoted name is a word (`file`('x') calls file).
_TOKENS = re.compile(
    r"""(?P<skip>--[^\n]*|\#[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.|'')*'|\$(?P<tag>\w*)\$.*?\$(?P=tag)\$)
      |(?P<word>[A-Za-z_][A-Za-z0-9_]*|"(?:[^"\\]|\\.)*"|`(?:[^`\\]|\\.)*`)
      |(?P<open>\()
      |(?P<semi>;)
      |(?P<other>\S)""",
    re.DOTALL | re.VERBOSE,
)
# Table (and scalar) functions that reach files, URLs, other servers or
# programs, by prefix (s3Cluster, urlCluster, icebergS3, azureBlobStorage...).
# readonly = 1 refuses them again in the engine.
_EXTERNAL = re.compile(
    r"(file|url|s3|gcs|oss|cosn|remote|cluster|mysql|postgres|hdfs|azure|jdbc|odbc|mongo|sqlite"
    r"|input|executable|redis|iceberg|deltalake|hudi|paimon|arrowflight|ytsaurus|kafka|hive"
    r"|dictionary|fuzzjson|fuzzquery)",
    re.IGNORECASE,
)


def check_statement(sql: str) -> None:
    """Refuse anything but one read (``QueryRefused``): another statement, a
    settings change (``SET``, a ``SETTINGS`` clause), ``INTO OUTFILE``, or a
    function that reaches files, URLs or other servers."""
    words: list[str] = []
    tokens = [m for m in _TOKENS.finditer(sql) if m.lastgroup != "skip"]
    for index, token in enumerate(tokens):
        kind, text = token.lastgroup, token.group()
        if kind == "semi":
            if any(t.lastgroup != "semi" for t in tokens[index + 1 :]):
                raise QueryRefused("One statement at a time: the console got more than one.")
            break
        if kind != "word":
            continue
        text = text.strip('`"')
        words.append(text.upper())
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if following is not None and following.lastgroup == "open" and _EXTERNAL.match(text):
            raise QueryRefused(
                "Refused: the SQL console cannot read or write files, URLs or other servers "
                f"({text})."
            )
        if text.upper() in {"SETTINGS", "OUTFILE", "SET"}:
            raise QueryRefused(f"Refused: settings are locked ({text.upper()}).")
    if not words:
        raise QueryRefused("Enter a query: the console got no SQL statement.")
    first = words[0]
    if first == "EXPLAIN":
        rest = [w for w in words[1:] if w not in _EXPLAIN_KINDS]
        first = rest[0] if rest else "EXPLAIN"
        if first in {"EXPLAIN", "DESCRIBE", "DESC", "SHOW", "EXISTS"}:
            first = f"EXPLAIN {first}"
    if first not in _FIRST_WORDS - {"EXPLAIN"}:
        raise QueryRefused(f"Refused: the SQL console only reads ({_READS}), not {first}.")


class ClickHouseSandbox:
    """The SQL console's runner on a ClickHouse source: the statement check,
    then the session's own guards (read-only, time, memory, result size)."""

    engine = "ClickHouse"

    def __init__(self, database: ClickHouseDatabase, limits: SandboxLimits) -> None:
        self._database = database
        # The session's guards were set when it was opened; these are what they are.
        self.limits = database.limits

    @property
    def views(self) -> tuple[str, ...]:
        return self._database.tables()

    def run(self, sql: str) -> SandboxResult:
        """Run ``sql`` and return its first rows, or raise a :class:`DashboardError`."""
        check_statement(sql)
        started = time.monotonic()
        try:
            result = self._database.session.read(sql)
        except AnalyzerError as exc:
            raise _console_error(str(exc), self.limits) from None
        rows = result.rows
        truncated = len(rows) > self.limits.max_rows
        return SandboxResult(
            list(result.columns),
            rows[: self.limits.max_rows],
            truncated,
            time.monotonic() - started,
        )

    def describe(self, view: str) -> SandboxResult:
        """The columns of one of the console's tables."""
        started = time.monotonic()
        name = ".".join("`" + part.replace("`", "") + "`" for part in view.split("."))
        try:
            result = self._database.session.read(f"DESCRIBE TABLE {name}")
        except AnalyzerError as exc:
            raise QueryFailed(str(exc)) from None
        return SandboxResult(list(result.columns), result.rows, False, time.monotonic() - started)


def _console_error(message: str, limits: SandboxLimits) -> DashboardError:
    if "TIMEOUT_EXCEEDED" in message:
        return QueryTimeout(f"Stopped after {limits.time_limit_s:g} s")
    if "MEMORY_LIMIT_EXCEEDED" in message:
        return QueryMemoryExceeded(
            f"Stopped: the query used too much memory (more than {limits.max_process_mb:,} MB)"
        )
    if "READONLY" in message:
        return QueryRefused(f"Refused by ClickHouse (read-only session): {message}")
    return QueryFailed(message)
