"""``toolspan dashboard (PATH... | --db FILE | --source SOURCE) [--store URL] [--port N]``."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._launch import launch, launch_source

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``dashboard`` sub-command to the ``toolspan`` command line."""
    parser = subparsers.add_parser(
        "dashboard",
        help="browse retries, findings and traces in the browser",
        description=(
            "Start the dashboard on trace files (ingested first, with the analyzer) or on "
            "a database made by `toolspan analyze --db`. Binds to 127.0.0.1 unless --host "
            "says otherwise."
        ),
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="OTLP/JSON trace files or dirs")
    parser.add_argument("--db", type=Path, metavar="FILE", help="database to open (or to fill)")
    parser.add_argument(
        "--source",
        metavar="SOURCE",
        help="a ClickHouse otel_traces instead: clickhouse://user:password@host:8123/db, "
        "clickhouses://... (TLS) or chdb:PATH",
    )
    parser.add_argument(
        "--table",
        default="otel_traces",
        metavar="NAME",
        help="with --source: the collector's traces table, [database.]name (default otel_traces)",
    )
    parser.add_argument(
        "--since", metavar="TIME", help="with --source: spans from TIME (ISO 8601, or 30m, 24h, 7d)"
    )
    parser.add_argument("--until", metavar="TIME", help="with --source: spans before TIME")
    parser.add_argument(
        "--follow",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="with --source: look for new spans this often and build the analysis again "
        "when some arrived (default 10; 0: never)",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="the shared store whose quarantines the Quarantines page lists and lifts: "
        "redis://host:6379/0 or a SQLite file (default: $TOOLSPAN_STORE)",
    )
    parser.add_argument("--port", type=int, default=8501, help="port (default: 8501)")
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument(
        "--write-tools",
        metavar="NAMES",
        help="comma-separated tool names or glob patterns that write (for foreign traces)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Ingest the given paths if any, then serve the dashboard until Ctrl-C."""
    if args.source is not None:
        return _run_source(args)
    if args.since or args.until:
        print("toolspan dashboard: error: --since and --until apply with --source", file=sys.stderr)
        return 2
    if not args.paths:
        if args.db is None:
            print("toolspan dashboard: error: give trace PATHs or --db FILE", file=sys.stderr)
            return 2
        return launch(args.db, host=args.host, port=args.port, store=args.store)
    if args.db is not None:
        return _ingest_and_launch(args, args.db)
    with tempfile.TemporaryDirectory(prefix="toolspan-dashboard-") as scratch:
        return _ingest_and_launch(args, Path(scratch) / "traces.duckdb")


def _ingest_and_launch(args: argparse.Namespace, db_path: Path) -> int:
    # Imported here: `toolspan dashboard --db FILE` needs no ingest machinery.
    from toolspan.analyzer import Analyzer, AnalyzerError

    try:
        with Analyzer(db_path) as analyzer:
            if args.write_tools:
                analyzer.set_write_tools([p.strip() for p in args.write_tools.split(",") if p])
            report = analyzer.ingest(args.paths)
    except AnalyzerError as exc:
        print(f"toolspan dashboard: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"toolspan dashboard: ingested {report.spans:,} spans from {report.files:,} files "
        f"into {db_path} ({len(report.bad_lines):,} bad lines skipped)"
    )
    for bad in report.bad_lines[:10]:
        print(f"  skipped {bad.path}:{bad.line}: {bad.reason}", file=sys.stderr)
    return launch(db_path, host=args.host, port=args.port, store=args.store)


def _run_source(args: argparse.Namespace) -> int:
    # Imported here: only ClickHouse sources need the analyzer's ClickHouse path.
    from toolspan.analyzer import AnalyzerError
    from toolspan.analyzer._clickhouse import parse_source, parse_time

    from ._clickhouse import SourceSpec

    if args.paths or args.db is not None:
        print("toolspan dashboard: error: --source reads ClickHouse: no PATHs or --db with it",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        parse_source(args.source)  # a bad source fails here, not in the app
        for moment in (args.since, args.until):
            if moment:
                parse_time(moment)
    except AnalyzerError as exc:
        print(f"toolspan dashboard: error: {exc}", file=sys.stderr)
        return 2
    write_tools = tuple(p.strip() for p in (args.write_tools or "").split(",") if p.strip())
    if not args.follow >= 0:
        print("toolspan dashboard: error: --follow takes seconds, 0 or more", file=sys.stderr)
        return 2
    spec = SourceSpec(args.source, args.table, args.since, args.until, write_tools, args.follow)
    return launch_source(spec, host=args.host, port=args.port, store=args.store)
