"""Benchmark: `toolspan analyze` on ClickHouse (embedded chDB) against a floor
measured in the same run, and how its time grows with the table.

Loads the analyzer benchmark's corpus (>= 1,000,000 spans, bench/analyzer_bench.py)
into an ``otel_traces`` table created with the collector exporter's DDL and
value mapping (analyzer/_exporter_table.py), in a chDB directory under
bench/.data/ (loaded once, reused). Every larger size of ``--spans`` is a
whole number of copies of that corpus made inside ClickHouse (INSERT ...
SELECT, seconds per million spans): each copy has its own trace ids and its
own conversation, request and idempotency-key values, so that its calls and
findings are its own. Then, per size:

  floor             SELECT count() with the analysis' time range and the
                    tool-span filter (reads the attribute maps: the least any
                    analysis must read)
  analyze (chDB)    ClickHouseAnalyzer summary + findings over the same range,
                    reading the raw spans (the tool spans extracted anew)
  with init         with --init: the same, after `toolspan clickhouse init`
                    (its materialized views keep a copy of the tool spans,
                    which the analysis reads instead); init's own time, once
                    per table, is printed beside it

and the ratio of analyze to the floor, and of each size's analyze time to the
smallest size's. With --parts, where one analysis of each size spends its
time (after init with --init), each part the best of --repeats, against the
floor: opening the source, each stage of tool spans, calls and attempts, the
summary, the findings computed and fetched, then built as Finding objects;
and the same findings fetched alone, out of a table of the session (what
any analysis returning them pays). With --duckdb, also the DuckDB path on
the smallest corpus as OTLP/JSON files, in a child process (bench/analyzer_bench.py's `analyze`
step), checked to find the same number of calls and findings.

Usage: python bench/clickhouse_bench.py [--spans 1000000,10000000] [--files 8]
           [--repeats 3] [--duckdb] [--init] [--parts]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import analyzer_bench  # noqa: E402
import clickhouse_connect  # noqa: E402

from toolspan.analyzer import ClickHouseAnalyzer, _clickhouse  # noqa: E402
from toolspan.analyzer import _exporter_table as clickhouse_otel  # noqa: E402
from toolspan.analyzer._clickhouse import expand_attributes  # noqa: E402
from toolspan.analyzer._model import collector_paused, finding_from_row  # noqa: E402

INSERT_ROWS = 100_000
SINCE = datetime.fromtimestamp(analyzer_bench.T0_NS / 1e9, tz=UTC)
UNTIL = datetime(2100, 1, 1, tzinfo=UTC)
# The analysis' own tool-span filter (clickhouse_derive.sql), as it expands it.
TOOL_FILTER = expand_attributes(
    "toolspan_has(SpanAttributes, 'toolspan.attempt')"
    " OR toolspan_attr(SpanAttributes, 'gen_ai.operation.name') = 'execute_tool'"
    " OR startsWith(SpanName, 'execute_tool')"
    " OR toolspan_attr(SpanAttributes, 'openinference.span.kind') = 'TOOL'",
    "map",
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


# Attributes whose values name a conversation, a request or an action: a copy
# of the corpus gets its own, so that it adds calls and findings of its own.
_PER_COPY_KEYS = (
    "'gen_ai.conversation.id', 'session.id', 'toolspan.request.id', 'toolspan.idempotency.key'"
)


def replicate(client: Any, copies: int, expected: int) -> tuple[str, float]:
    """A database holding ``copies`` copies of otel.otel_traces (made inside
    ClickHouse, unless it exists already); its name and the seconds taken."""
    database = f"otel_x{copies}"
    client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
    clickhouse_otel.create_table(client, f"{database}.otel_traces")
    have = int(client.query(f"SELECT count() FROM {database}.otel_traces").result_rows[0][0])
    if have == expected:
        return database, 0.0
    started = time.perf_counter()
    client.command(f"TRUNCATE TABLE {database}.otel_traces")
    columns = ", ".join(clickhouse_otel.COLUMNS)
    for copy in range(copies):
        tag = f"x{copy:02d}"
        client.command(
            f"INSERT INTO {database}.otel_traces ({columns}) "
            f"SELECT * REPLACE (concat('{tag}', TraceId) AS TraceId, "
            f"mapApply((k, v) -> (k, if(k IN ({_PER_COPY_KEYS}), concat(v, '-{tag}'), v)), "
            f"SpanAttributes) AS SpanAttributes) "
            f"FROM (SELECT {columns} FROM otel.otel_traces)"
        )
    client.command(f"OPTIMIZE TABLE {database}.otel_traces FINAL")
    return database, time.perf_counter() - started


def init(source: str, database: str) -> float:
    """`toolspan clickhouse init` on the table (its copies made from the spans
    already there), unless current copies exist; the seconds taken."""
    with ClickHouseAnalyzer(source) as az:
        if az.copies is not None:
            return 0.0
        started = time.perf_counter()
        az.create_views(f"toolspan_{database}")
        return time.perf_counter() - started


def timed(repeats: int, run: Any) -> tuple[float, Any]:
    """The fastest of ``repeats`` runs (the machine is shared) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def parts(source: str, copies: bool, repeats: int) -> dict[str, float]:
    """Seconds of each part of one analysis (the best of ``repeats``), as
    ClickHouseAnalyzer runs them (its own build, each stage timed; the two
    DROPs after it, about 10 ms, are in no part)."""
    best: dict[str, float] = {}

    @contextlib.contextmanager
    def part(name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        best[name] = min(best.get(name, float("inf")), time.perf_counter() - started)

    for _ in range(repeats):
        with part("open (connect, check the table, find init's copies)"):
            az = ClickHouseAnalyzer(source, since=SINCE, until=UNTIL, read_copies=copies)
        with az:
            params = {**az._parameters(), "min_repeats": 3}
            command = az._command
            az._command = _stages_timed(command, part)  # type: ignore[method-assign]
            az._materialize()
            az._command = command  # type: ignore[method-assign]
            with part("summary"):
                az.summary()
            sql = az._render(_clickhouse.statement("clickhouse_findings", "findings"))
            # With the collector paused, as findings() fetches and builds.
            with part("findings: computed and fetched (as findings() does)"), collector_paused():
                rows = az._rows(sql, params)
            with part("findings: built (as findings() does)"), collector_paused():
                built = [finding_from_row(row) for row in rows]
            az._command(f"CREATE TEMPORARY TABLE _bench_findings ENGINE = Memory AS {sql}", params)
            with part("(the same rows fetched alone, from a table)"), collector_paused():
                again = az._rows("SELECT * FROM _bench_findings")
            assert len(again) == len(built)
    return best


def _stages_timed(command: Any, part: Any) -> Any:
    """``command`` (ClickHouseAnalyzer._command) timing each stage's CREATE as a part."""
    stems = {f"CREATE TEMPORARY TABLE {table} ": stem for table, stem in _clickhouse._STAGES}

    def timed(sql: str, params: Any = None) -> None:
        stem = next((stem for prefix, stem in stems.items() if sql.startswith(prefix)), None)
        with part(f"stage {stem}") if stem else contextlib.nullcontext():
            command(sql, params)

    return timed


def print_parts(best: dict[str, float], floor_s: float) -> None:
    print(f"{'part':<55} {'s':>7} {'x floor':>8}")
    for name, seconds in best.items():
        print(f"{name:<55} {seconds:>7.3f} {seconds / floor_s:>7.1f}x")
    counted = sum(v for k, v in best.items() if not k.startswith("("))
    print(f"{'all parts':<55} {counted:>7.3f} {counted / floor_s:>7.1f}x")
    # What any analysis that returns these findings spends without computing anything.
    delivery = sum(v for k, v in best.items() if k.startswith(("open", "findings: built", "(")))
    print(
        f"{'opening + fetching alone + building':<55} {delivery:>7.3f} {delivery / floor_s:>7.1f}x"
    )


def _load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ", 3)[0]
    except OSError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--spans",
        default="1000000",
        help="sizes, comma-separated: the first is generated, "
        "every other one is a whole number of copies of it (e.g. 1000000,10000000)",
    )
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs per timed step")
    parser.add_argument("--duckdb", action="store_true", help="also the DuckDB path, first size")
    parser.add_argument(
        "--init", action="store_true", help="also analyze after `toolspan clickhouse init`"
    )
    parser.add_argument(
        "--parts", action="store_true", help="where one analysis of each size spends its time"
    )
    args = parser.parse_args()
    sizes = [int(x) for x in args.spans.split(",")]
    files = analyzer_bench.generate(sizes[0], args.files)
    written = int((files[0].parent / ".complete").read_text())
    directory = analyzer_bench.DATA / f"chdb-{sizes[0]}-files-{args.files}"
    client = clickhouse_connect.get_client(dsn=f"chdb://{directory}")
    loaded = load(client, files, written)
    print(
        f"corpus: {written:,} spans in otel.otel_traces (chDB {client.server_version}, "
        f"{'loaded in ' + format(loaded, '.0f') + ' s' if loaded else 'already loaded'})"
    )
    databases = {sizes[0]: "otel"}
    for size in sizes[1:]:
        copies = max(1, round(size / written))
        databases[size], made = replicate(client, copies, copies * written)
        how = f"made in {made:.0f} s" if made else "already made"
        print(
            f"{copies * written:,} spans in {databases[size]}.otel_traces ({copies} copies, {how})"
        )
    params = {"since": SINCE.replace(tzinfo=None), "until": UNTIL.replace(tzinfo=None)}
    time_range = "Timestamp >= {since:DateTime64(9)} AND Timestamp < {until:DateTime64(9)}"
    floors: dict[int, tuple[float, int, int]] = {}
    for size, database in databases.items():

        def count(sql: str) -> int:
            return int(client.query(sql, parameters=params).result_rows[0][0])

        table = f"{database}.otel_traces"
        spans = count(f"SELECT count() FROM {table} WHERE {time_range}")
        floor_s, tool_spans = timed(
            args.repeats,
            lambda table=table: count(
                f"SELECT count() FROM {table} WHERE {time_range} AND ({TOOL_FILTER})"
            ),
        )
        floors[size] = (floor_s, spans, tool_spans)
    client.close()  # one chDB engine per process: the analyzer opens its own client

    results: dict[int, tuple[float, dict[str, Any], int]] = {}
    with_init: dict[int, tuple[float, float]] = {}
    for size, database in databases.items():
        source = f"chdb:{directory}?database={database}"

        def analyze_clickhouse(
            source: str = source, copies: bool = False
        ) -> tuple[dict[str, Any], int]:
            with ClickHouseAnalyzer(source, since=SINCE, until=UNTIL, read_copies=copies) as az:
                assert (az.copies is not None) == copies
                return az.summary(), len(az.findings())

        seconds, (summary, findings) = timed(args.repeats, analyze_clickhouse)
        results[size] = (seconds, summary, findings)
        if args.init:
            made = init(source, database)
            copied_s, (copied, copied_findings) = timed(
                args.repeats, lambda source=source: analyze_clickhouse(source, copies=True)
            )
            if (copied, copied_findings) != (summary, findings):
                raise SystemExit(f"{size:,} spans: init's copies give other results")
            with_init[size] = (copied_s, made)
    first = sizes[0]
    print(f"load average {_load_average()} (2 cores, shared); best of {args.repeats}")
    print(
        f"{'spans':>12} {'tool spans':>11} {'floor s':>8} {'analyze s':>10} {'x floor':>8} "
        f"{'x first':>8} {'calls':>10} {'findings':>9}"
    )
    report = []
    for size in sizes:
        floor_s, spans, tool_spans = floors[size]
        seconds, summary, findings = results[size]
        growth = seconds / results[first][0]
        print(
            f"{spans:>12,} {tool_spans:>11,} {floor_s:>8.3f} {seconds:>10.3f} "
            f"{seconds / floor_s:>7.1f}x {growth:>7.1f}x {summary['calls']:>10,} {findings:>9,}"
        )
        report.append(
            {
                "spans": spans,
                "floor_s": floor_s,
                "analyze_s": seconds,
                "x_floor": seconds / floor_s,
                "x_first": growth,
                "calls": summary["calls"],
                "findings": findings,
            }
        )
    if with_init:
        print(f"with `toolspan clickhouse init` (same calls and findings), best of {args.repeats}")
        print(f"{'spans':>12} {'analyze s':>10} {'x floor':>8} {'x first':>8} {'init s':>8}")
        for size, row in zip(sizes, report, strict=True):
            copied_s, made = with_init[size]
            growth = copied_s / with_init[first][0]
            print(
                f"{row['spans']:>12,} {copied_s:>10.3f} {copied_s / row['floor_s']:>7.1f}x "
                f"{growth:>7.1f}x {made:>8.1f}"
            )
            row.update(init_analyze_s=copied_s, init_x_floor=copied_s / row["floor_s"], init_s=made)
    print(json.dumps(report))
    for size in sizes if args.parts else ():
        source = f"chdb:{directory}?database={databases[size]}"
        reads = "init's copies" if args.init else "the raw spans"
        print(f"{size:,} spans, {reads}: one analysis by parts, best of {args.repeats} each")
        print_parts(parts(source, args.init, args.repeats), floors[size][0])
    if args.duckdb:
        duck = analyzer_bench.best_of(args.repeats, "analyze", files)
        _, summary, findings = results[first]
        same = summary["calls"] == duck["calls"] and findings == duck["findings"]
        print(
            f"DuckDB path on the {written:,} spans as files: {duck['seconds']:.3f} s "
            f"(chDB {results[first][0] / duck['seconds']:.2f}x); {duck['calls']:,} calls, "
            f"{duck['findings']:,} findings -> {'same' if same else 'DIFFERENT'}"
        )
        if not same:
            raise SystemExit("the two paths disagree")


if __name__ == "__main__":
    main()
