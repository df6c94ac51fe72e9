"""``toolspan analyze`` and ``toolspan sql``: the analyzer's command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from . import _clickhouse, _render
from ._analyzer import DEFAULT_IN_MEMORY_LIMIT, DEFAULT_MEMORY_LIMIT, Analyzer
from ._errors import AnalyzerError
from ._model import (
    DEFAULT_MIN_REPEATS,
    FINDING_KINDS,
    Finding,
    IngestReport,
    QueryResult,
    unrecognised_genai_spans,
)

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``analyze`` and ``sql`` sub-commands."""
    analyze = subparsers.add_parser(
        "analyze",
        help="find agent loops and duplicate writes in trace files",
        description="Ingest OTLP/JSON trace files and print the summary and the findings;"
        " or analyze a ClickHouse otel_traces table in place (SOURCE clickhouse://..., chdb:PATH).",
    )
    analyze.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files, directories or globs; or one ClickHouse source (docs/clickhouse.md)",
    )
    _add_db(analyze)
    _add_clickhouse(analyze)
    analyze.add_argument(
        "--min-repeats",
        type=int,
        default=DEFAULT_MIN_REPEATS,
        metavar="N",
        help=f"calls that make a loop (default {DEFAULT_MIN_REPEATS})",
    )
    analyze.add_argument(
        "--write-tools",
        action="append",
        default=[],
        metavar="NAMES",
        help="comma-separated tool names or glob patterns that write",
    )
    analyze.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    analyze.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="KIND",
        help=f"exit 1 when a finding of this kind exists ({', '.join(FINDING_KINDS)} or any),"
        " or when GenAI spans were read but no tool call was recognised in them",
    )
    analyze.add_argument("--strict", action="store_true", help="fail on corrupt lines")
    analyze.add_argument(
        "--allow-empty",
        action="store_true",
        help="exit 0 when the inputs hold no span at all (by default that is an error, exit 2),"
        " and let --fail-on pass when no tool call was recognised in the GenAI spans read",
    )
    analyze.set_defaults(handler=run_analyze)

    sql = subparsers.add_parser(
        "sql",
        help="run SQL over the analyzer's views",
        description="Run one SQL query over spans, tool_calls, attempts, conversations, findings.",
    )
    sql.add_argument("query", metavar="QUERY")
    sql.add_argument("paths", nargs="*", metavar="PATH", help="trace files to ingest first")
    _add_db(sql)
    sql.add_argument(
        "--source",
        metavar="SOURCE",
        help="query the views of a ClickHouse source instead (toolspan clickhouse init)",
    )
    sql.add_argument(
        "--database",
        default=None,
        metavar="NAME",
        help="with --source: the database of the views (default toolspan)",
    )
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument("--strict", action="store_true", help="fail on corrupt lines")
    sql.set_defaults(handler=run_sql)

    clickhouse = subparsers.add_parser(
        "clickhouse",
        help="set up the analyzer's views over a ClickHouse otel_traces table",
        description="ClickHouse sources (docs/clickhouse.md).",
    )
    actions = clickhouse.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = actions.add_parser(
        "init",
        help="create the views tool_calls, attempts, conversations, findings",
        description="Create (or replace) the analyzer's views in DATABASE, reading the"
        " collector's table; the table itself is never written.",
    )
    init.add_argument(
        "source", metavar="SOURCE", help="clickhouse://user:password@host:8123/db or chdb:PATH"
    )
    init.add_argument(
        "--database",
        default=_clickhouse.DEFAULT_VIEWS_DATABASE,
        metavar="NAME",
        help="where the views go (default toolspan; created if missing)",
    )
    init.add_argument(
        "--table",
        default=_clickhouse.DEFAULT_TABLE,
        metavar="[DB.]TABLE",
        help="the collector's traces table",
    )
    init.add_argument(
        "--write-tools",
        action="append",
        default=[],
        metavar="NAMES",
        help="comma-separated tool names or glob patterns that write (fixed in the views)",
    )
    init.set_defaults(handler=run_clickhouse_init)


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="FILE", help="DuckDB database file (default: in memory)")
    parser.add_argument(
        "--memory-limit",
        default=None,
        metavar="SIZE",
        help=(
            "DuckDB's memory budget; beyond it, work spills to disk "
            f"({DEFAULT_MEMORY_LIMIT} with --db, else {DEFAULT_IN_MEMORY_LIMIT})"
        ),
    )
    parser.add_argument(
        "--temp-directory",
        default=None,
        metavar="DIR",
        help="where DuckDB spills (default: FILE.tmp beside --db, else a private temp directory)",
    )


def _memory(args: argparse.Namespace) -> dict[str, Any]:
    return {"memory_limit": args.memory_limit, "temp_directory": args.temp_directory}


def _add_clickhouse(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ClickHouse sources")
    group.add_argument(
        "--table",
        default=None,
        metavar="[DB.]TABLE",
        help="the collector's traces table (otel_traces)",
    )
    group.add_argument(
        "--since",
        metavar="TIME",
        help="spans that start at or after TIME (ISO 8601, or 24h, 7d ago)",
    )
    group.add_argument("--until", metavar="TIME", help="spans that start before TIME")


def run_analyze(args: argparse.Namespace) -> int:
    """The ``analyze`` sub-command."""
    fail_on = _split(args.fail_on)
    unknown = set(fail_on) - {*FINDING_KINDS, "any"}
    if unknown:
        return _error(f"unknown --fail-on kind: {', '.join(sorted(unknown))}")
    if args.min_repeats < 2:
        return _error("--min-repeats must be at least 2")
    if any(_clickhouse.is_clickhouse_source(p) for p in args.paths):
        return _analyze_clickhouse(args, fail_on)
    if args.table or args.since or args.until:
        return _error("--table, --since and --until apply to ClickHouse sources only")
    try:
        with Analyzer(args.db, **_memory(args)) as az:
            write_tools = _split(args.write_tools)
            # Before the ingest: its refresh then computes side effects and
            # findings once, with these write tools.
            if write_tools:
                az.set_write_tools(write_tools)
            _report(az.ingest(args.paths, strict=args.strict, progress=_progress))
            _advise_a_file(az, args)
            summary = az.summary()
            if not summary["spans"] and not args.allow_empty:
                # A mis-pointed CI gate must not pass on nothing.
                return _error(
                    f"no spans in {summary['files']} file(s) ({summary['lines']} line(s), "
                    f"{summary['bad_lines']} corrupt): nothing to analyze; "
                    "--allow-empty accepts that"
                )
            findings = az.findings(min_repeats=args.min_repeats)
    except AnalyzerError as exc:
        return _error(str(exc))
    return _print_analysis(summary, findings, args, fail_on)


def _analyze_clickhouse(args: argparse.Namespace, fail_on: list[str]) -> int:
    if len(args.paths) != 1 or args.db or args.strict:
        return _error("a ClickHouse source is analyzed alone (no files, --db or --strict)")
    try:
        since = _clickhouse.parse_time(args.since) if args.since else None
        until = _clickhouse.parse_time(args.until) if args.until else None
        with _clickhouse.ClickHouseAnalyzer(
            args.paths[0],
            table=args.table or _clickhouse.DEFAULT_TABLE,
            since=since,
            until=until,
            write_tools=_split(args.write_tools),
        ) as az:
            window = "".join(
                f", {name} {moment.isoformat()}"
                for name, moment in (("since", since), ("until", until))
                if moment
            )
            reads = f"init's copies in {az.copies}" if az.copies else "the raw spans"
            _progress(f"analyzing {az.table} in {az.source.display()}{window}, from {reads}")
            summary = az.summary()
            findings = az.findings(min_repeats=args.min_repeats)
    except AnalyzerError as exc:
        return _error(str(exc))
    return _print_analysis(summary, findings, args, fail_on)


def _print_analysis(
    summary: dict[str, Any], findings: list[Finding], args: argparse.Namespace, fail_on: list[str]
) -> int:
    output = args.format
    if output == "json":
        out: dict[str, Any] = {"summary": summary, "findings": [f.to_json() for f in findings]}
        print(_render.json_text(out))
    else:
        markdown = output == "markdown"
        print(
            ("## Summary\n\n" if markdown else "Summary\n\n")
            + _render.summary_text(summary, markdown=markdown)
        )
        print("\n## Findings\n" if markdown else "\nFindings\n")
        rows = _render.findings_rows(findings)
        print(_render.table(_render.FINDING_COLUMNS, rows, markdown=markdown) if rows else "none")
    kinds = {f.kind for f in findings}
    failed = bool(kinds & set(fail_on)) or ("any" in fail_on and bool(kinds))
    return EXIT_FINDINGS if _silent_zero(summary, fail_on, args.allow_empty) or failed else EXIT_OK


def _silent_zero(summary: dict[str, Any], fail_on: list[str], allow_empty: bool) -> bool:
    """Warn on stderr when GenAI spans arrived but no tool call was recognised
    in them (issue 39): "0 findings" then means nothing was understood, not
    that nothing went wrong. A CI gate (``--fail-on``) fails on it unless
    ``--allow-empty``. Spans with nothing GenAI about them (plain HTTP) are not
    this case. Returns whether the gate fails."""
    genai = unrecognised_genai_spans(summary)
    if not genai:
        return False
    print(
        f"toolspan: warning: {genai} GenAI span(s) read, no tool call recognised: the tools"
        " are likely not instrumented (only LLM or agent spans arrived) or the"
        " instrumentation records its calls in a form the analyzer does not read, or with"
        " its content capture off; findings cannot be told from these spans."
        " See docs/analyzer.md#coverage",
        file=sys.stderr,
    )
    if not fail_on or allow_empty:
        return False
    print(
        f"toolspan: --fail-on: failing, no tool call recognised in {genai} GenAI span(s);"
        " --allow-empty accepts that",
        file=sys.stderr,
    )
    return True


def run_sql(args: argparse.Namespace) -> int:
    """The ``sql`` sub-command."""
    if args.source:
        return _sql_clickhouse(args)
    if args.database:
        return _error("--database applies with --source only")
    if not args.paths and not args.db:
        return _error("give trace files to read, or --db FILE")
    try:
        read_only = bool(args.db) and not args.paths
        with Analyzer(args.db, read_only=read_only, **_memory(args)) as az:
            if args.paths:
                _report(az.ingest(args.paths, strict=args.strict, progress=_progress))
                _advise_a_file(az, args)
            result = az.query(args.query)
    except AnalyzerError as exc:
        return _error(str(exc))
    return _print_result(result, args.format)


def _sql_clickhouse(args: argparse.Namespace) -> int:
    if args.paths or args.db:
        return _error("--source queries ClickHouse views: no trace files or --db with it")
    try:
        result = _clickhouse.run_sql(
            args.source, args.query, database=args.database or _clickhouse.DEFAULT_VIEWS_DATABASE
        )
    except AnalyzerError as exc:
        return _error(str(exc))
    return _print_result(result, args.format)


def run_clickhouse_init(args: argparse.Namespace) -> int:
    """The ``clickhouse init`` sub-command: create the views in a database."""
    try:
        with _clickhouse.ClickHouseAnalyzer(
            args.source, table=args.table, write_tools=_split(args.write_tools)
        ) as az:
            views = az.create_views(args.database)
            table = az.table
    except AnalyzerError as exc:
        return _error(str(exc))
    print(f"created in {args.database}, reading {table}: {', '.join(views)}")
    return EXIT_OK


def _print_result(result: QueryResult, output: str) -> int:
    if output == "json":
        records = [
            {c: _render.json_value(v) for c, v in zip(result.columns, row, strict=True)}
            for row in result.rows
        ]
        print(_render.json_text(records))
    elif output == "csv":
        print(_render.csv_text(result.columns, result.rows))
    else:
        print(_render.table(result.columns, result.rows))
    return EXIT_OK


def _split(values: Sequence[str]) -> list[str]:
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _progress(message: str) -> None:
    print(f"toolspan: {message}", file=sys.stderr, flush=True)


def _report(report: IngestReport) -> None:
    for bad in report.bad_lines:
        print(f"{bad.path}:{bad.line}: skipped: {bad.reason}", file=sys.stderr)
    if report.skipped_files:
        _progress(f"{report.skipped_files} file(s) already ingested, skipped")


def _advise_a_file(az: Analyzer, args: argparse.Namespace) -> None:
    """Say when an in-memory database outgrew --memory-limit: it still works,
    spilling to disk, but each later scan reads the spilled blocks back."""
    spilled = az.spilled_bytes() if args.db is None else 0
    if spilled:
        _progress(
            f"the in-memory database outgrew --memory-limit {az.memory_limit} and "
            f"spilled {spilled / 1e6:,.0f} MB to its temp directory; for input this size "
            "use --db FILE (kept compressed on disk, and analysed again without "
            "reading the traces) or raise --memory-limit"
        )


def _error(message: str) -> int:
    print(f"toolspan: error: {message}", file=sys.stderr)
    return EXIT_ERROR
