"""Benchmark: first render of each dashboard page on a >= 1,000,000-span database.

Reuses the analyzer benchmark's corpus (bench/.data/spans-N-files-M, generated
if missing), ingests it once with the analyzer into
bench/.data/dashboard-N.duckdb, then renders every page with Streamlit's
AppTest in this process and times it:

  open + sidebar   first run of the app: open the database, sidebar filters, Overview
  <page> cold      the page's first render with Streamlit's query cache cleared
  <page> warm      the same page again (cached query results)

The SQL console is timed with a typical aggregate query submitted.

With ``--source chdb`` the same pages read the OpenTelemetry Collector's
``otel_traces`` in embedded ClickHouse instead (bench/.data/dashboard-chdb-N,
generated inside ClickHouse with numbers(): bench/sql/dashboard_spans.sql);
"open" then includes building the session's tables from the collector's table;
with ``--init`` from the copies ``toolspan clickhouse init`` keeps (made first,
once, and timed).

Usage: python bench/dashboard_bench.py [--spans 1000000] [--files 8] [--source duckdb|chdb]
           [--init]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from toolspan._sql import parse_statements
from toolspan.analyzer import Analyzer

HERE = Path(__file__).resolve().parent
APP = HERE.parent / "dashboard" / "app.py"
PAGES = ("overview", "timelines", "findings", "trace", "console")
CONSOLE_SQL = (
    "SELECT tool, status, count(*) AS calls, sum(attempts) AS attempts "
    "FROM tool_calls GROUP BY ALL ORDER BY calls DESC"
)


def corpus(spans: int, files: int) -> list[Path]:
    spec = importlib.util.spec_from_file_location("analyzer_bench", HERE / "analyzer_bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths: list[Path] = module.generate(spans, files)
    return paths


def database(files: list[Path], spans: int) -> Path:
    db = HERE / ".data" / f"dashboard-{spans}.duckdb"
    done = db.with_suffix(".complete")
    if not done.exists():
        db.unlink(missing_ok=True)
        started = time.perf_counter()
        with Analyzer(db) as analyzer:
            report = analyzer.ingest(files)
        print(f"ingested {report.spans:,} spans in {time.perf_counter() - started:.1f} s -> {db}")
        done.touch()
    return db


def chdb_source(spans: int) -> str:
    """A chDB directory holding ``otel.otel_traces`` with ``spans`` generated spans."""
    import clickhouse_connect

    from toolspan.analyzer import _exporter_table  # the collector exporter's DDL

    data = HERE / ".data" / f"dashboard-chdb-{spans}"
    done = data / ".complete"
    if not done.exists():
        data.mkdir(parents=True, exist_ok=True)
        sql = parse_statements((HERE / "sql" / "dashboard_spans.sql").read_text())
        started = time.perf_counter()
        client = clickhouse_connect.get_client(dsn=f"chdb://{data}")
        client.command("DROP DATABASE IF EXISTS otel")
        client.command("CREATE DATABASE otel")
        _exporter_table.create_table(client, "otel.otel_traces")
        insert = sql["insert_spans"].replace("$table", "otel.otel_traces")
        client.command(insert, parameters={"spans": spans})
        client.close()
        print(f"generated {spans:,} spans in {time.perf_counter() - started:.1f} s -> {data}")
        done.touch()
    return f"chdb:{data}?database=otel"


def init(source: str) -> str:
    """`toolspan clickhouse init` on the source unless its copies are current;
    what the analysis will read."""
    from toolspan.analyzer._clickhouse import ClickHouseAnalyzer

    with ClickHouseAnalyzer(source) as az:
        if az.copies is None:
            started = time.perf_counter()
            az.create_views("toolspan")
            print(f"clickhouse init in {time.perf_counter() - started:.1f} s")
    with ClickHouseAnalyzer(source) as az:
        if az.copies is None:
            raise SystemExit("init's copies are not read")
        return f"in {az.copies}"


def timed(action: Callable[..., AppTest], *args: object) -> float:
    started = time.perf_counter()
    app = action(*args)
    elapsed = time.perf_counter() - started
    if app.exception:
        raise SystemExit(f"page raised: {[e.value for e in app.exception]}")
    if app.error:
        raise SystemExit(f"page showed an error: {[e.value for e in app.error]}")
    return elapsed


def render(app: AppTest, page: str) -> AppTest:
    app.switch_page(f"_pages/{page}.py").run(timeout=300)
    if page == "console":
        app.text_area(key="console_sql").set_value(CONSOLE_SQL)
        app.button[-1].click().run(timeout=300)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--source", choices=("duckdb", "chdb"), default="duckdb")
    parser.add_argument("--init", action="store_true", help="chdb: after clickhouse init")
    args = parser.parse_args()
    print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    if args.source == "chdb":
        from toolspan.dashboard._clickhouse import SourceSpec
        from toolspan.dashboard._env import SOURCE_ENV

        source = chdb_source(args.spans)
        copies = init(source) if args.init else "none (the raw spans)"
        spec = SourceSpec(source, write_tools=("send_email_*",), follow_s=0)
        os.environ[SOURCE_ENV] = spec.to_env()
        print(f"source: {source}, {args.spans:,} spans; init's copies: {copies}")
        pages(args.spans)
        return
    db = database(corpus(args.spans, args.files), args.spans)
    os.environ["TOOLSPAN_DASHBOARD_DB"] = str(db)
    with Analyzer(db, read_only=True) as analyzer:
        counts = analyzer.query(
            "SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM tool_calls), "
            "(SELECT count(*) FROM findings)"
        ).rows[0]
    print(f"database: {counts[0]:,} spans, {counts[1]:,} tool calls, {counts[2]:,} findings")
    pages(args.spans)


def pages(spans: int) -> None:
    """Time the app's start and every page, cold and warm."""
    app = AppTest.from_file(APP, default_timeout=300)
    first = timed(functools.partial(app.run, timeout=300))
    print(f"{'open + sidebar + overview':<28}{first:8.2f} s")
    for page in PAGES:
        st.cache_data.clear()
        cold = timed(render, app, page)
        warm = timed(render, app, page)
        print(f"{page + ' cold':<28}{cold:8.2f} s    warm {warm:6.2f} s")
    print(f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main()
