"""Benchmark: `toolspan analyze` on ClickHouse (embedded chDB) against floors
measured in the same run.

Loads the analyzer benchmark's corpus (>= 1,000,000 spans, bench/analyzer_bench.py)
into an ``otel_traces`` table created with the collector exporter's DDL and
value mapping (tests/clickhouse_otel.py), in a chDB directory under
bench/.data/ (loaded once, reused), then times:

  count floor       SELECT count() over the table with the analysis' time range
  filter floor      SELECT count() with the time range and the tool-span filter
                    (reads the attribute maps: the least any analysis must read)
  analyze (chDB)    ClickHouseAnalyzer summary + findings over the same range
  analyze (DuckDB)  the DuckDB path on the same spans as OTLP/JSON files, in a
                    child process (bench/analyzer_bench.py's `analyze` step)

and checks that both paths found the same number of calls and findings.

Usage: python bench/clickhouse_bench.py [--spans 1000000] [--files 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import analyzer_bench  # noqa: E402
import clickhouse_connect  # noqa: E402

from tests import clickhouse_otel  # noqa: E402
from toolspan.analyzer import ClickHouseAnalyzer  # noqa: E402

INSERT_ROWS = 100_000
SINCE = datetime.fromtimestamp(analyzer_bench.T0_NS / 1e9, tz=UTC)
UNTIL = datetime(2100, 1, 1, tzinfo=UTC)
TOOL_FILTER = (
    "mapContains(SpanAttributes, 'toolspan.attempt')"
    " OR SpanAttributes['gen_ai.operation.name'] = 'execute_tool'"
    " OR startsWith(SpanName, 'execute_tool')"
    " OR SpanAttributes['openinference.span.kind'] = 'TOOL'"
)


def load(client: Any, files: list[Path], expected: int) -> float:
    """Create and fill otel.otel_traces unless it already holds the corpus; seconds taken."""
    client.command("CREATE DATABASE IF NOT EXISTS otel")
    clickhouse_otel.create_table(client, "otel.otel_traces")
    have = int(client.query("SELECT count() FROM otel.otel_traces").result_rows[0][0])
    if have == expected:
        return 0.0
    started = time.perf_counter()
    client.command("TRUNCATE TABLE otel.otel_traces")
    for path in files:
        rows = clickhouse_otel.rows_from_files([path])
        for start in range(0, len(rows), INSERT_ROWS):
            clickhouse_otel.insert_rows(
                client, rows[start : start + INSERT_ROWS], "otel.otel_traces"
            )
    client.command("OPTIMIZE TABLE otel.otel_traces FINAL")
    return time.perf_counter() - started


def timed(repeats: int, run: Any) -> tuple[float, Any]:
    """The fastest of ``repeats`` runs (the machine is shared) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs per timed step")
    args = parser.parse_args()
    files = analyzer_bench.generate(args.spans, args.files)
    written = int((files[0].parent / ".complete").read_text())
    directory = analyzer_bench.DATA / f"chdb-{args.spans}-files-{args.files}"
    client = clickhouse_connect.get_client(dsn=f"chdb://{directory}")
    loaded = load(client, files, written)
    print(
        f"corpus: {written:,} spans in otel.otel_traces (chDB {client.server_version}, "
        f"{'loaded in ' + format(loaded, '.0f') + ' s' if loaded else 'already loaded'})"
    )
    params = {"since": SINCE.replace(tzinfo=None), "until": UNTIL.replace(tzinfo=None)}
    time_range = "Timestamp >= {since:DateTime64(9)} AND Timestamp < {until:DateTime64(9)}"

    def count(sql: str) -> int:
        return int(client.query(sql, parameters=params).result_rows[0][0])

    count_s, spans = timed(
        args.repeats, lambda: count(f"SELECT count() FROM otel.otel_traces WHERE {time_range}")
    )
    filter_s, tool_spans = timed(
        args.repeats,
        lambda: count(
            f"SELECT count() FROM otel.otel_traces WHERE {time_range} AND ({TOOL_FILTER})"
        ),
    )
    client.close()  # one chDB engine per process: the analyzer opens its own client

    def analyze_clickhouse() -> tuple[dict[str, Any], int]:
        with ClickHouseAnalyzer(f"chdb:{directory}?database=otel", since=SINCE, until=UNTIL) as az:
            return az.summary(), len(az.findings())

    chdb_s, (summary, findings) = timed(args.repeats, analyze_clickhouse)
    duck = analyzer_bench.best_of(args.repeats, "analyze", files)
    rows = [
        ("SELECT count() with the time range (floor)", count_s),
        ("SELECT count() with range + tool-span filter (floor)", filter_s),
        ("toolspan analyze on chDB (summary + findings)", chdb_s),
        ("toolspan analyze, DuckDB path on the files", duck["seconds"]),
    ]
    print(f"{'step':<54} {'seconds':>8} {'x count':>9} {'x filter':>9} {'x DuckDB':>9}")
    for label, seconds in rows:
        print(
            f"{label:<54} {seconds:>8.3f} {seconds / count_s:>8.1f}x {seconds / filter_s:>8.2f}x "
            f"{seconds / duck['seconds']:>8.2f}x"
        )
    same = summary["calls"] == duck["calls"] and findings == duck["findings"]
    print(
        f"spans {spans:,} ({tool_spans:,} tool spans); chDB: {summary['calls']:,} calls, "
        f"{findings:,} findings; DuckDB: {duck['calls']:,} calls, {duck['findings']:,} findings"
        f" -> {'same' if same else 'DIFFERENT'}"
    )
    print(
        json.dumps(
            {
                "chdb_s": chdb_s,
                "duckdb_s": duck["seconds"],
                "count_s": count_s,
                "filter_s": filter_s,
            }
        )
    )
    if not same:
        raise SystemExit("the two paths disagree")


if __name__ == "__main__":
    main()
