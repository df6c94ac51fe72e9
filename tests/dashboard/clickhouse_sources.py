"""Trace sets loaded both ways, for the dashboard-on-ClickHouse tests: into an
analyzer database (DuckDB) and into the collector's ``otel_traces`` in embedded
chDB (the exporter's DDL and value mapping, ``analyzer/_exporter_table.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.analyzer.conftest import Recorder
from tests.analyzer.retry_traces import write_retry_traces
from tests.clickhouse_backend import Backend
from toolspan.analyzer import Analyzer
from toolspan.analyzer import _exporter_table as clickhouse_otel
from toolspan.analyzer._inputs import resolve

from .traces import write_traces

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
WRITE_TOOLS = ("send_*", "refund_*", "create_*", "charge*")


def third_party(path: Path) -> Path:
    """GenAI execute_tool and OpenInference TOOL spans: a loop over three
    spellings of one JSON argument, a duplicate write, a failed call, a loop of
    OpenInference calls in a session."""
    rec = Recorder()
    with rec.conversation("c-genai"):
        rec.noise("c-genai")
        for arguments in ('{"city": "Paris"}', '{ "city":"Paris" }', '{"city":"Paris"}'):
            rec.genai_tool("weather", arguments, '"sunny"', conversation="c-genai")
        for _ in range(2):
            rec.genai_tool("create_ticket", '{"title": "x"}', '"T-1"', conversation="c-genai")
        rec.genai_tool("fetch", '{"id": 9}', None, conversation="c-genai", error="http_503")
    with rec.conversation(None):
        for _ in range(3):
            rec.openinference_tool("lookup", '{"q": 1}', '"found"', session="s-oi")
    return Recorder.write(path, rec.spans)


def trace_set(name: str, root: Path) -> list[Path]:
    """``samples``: the sample traces; ``scenarios``: the dashboard's scenario,
    the retry-safety scenario and third-party spans, written under ``root``."""
    if name == "samples":
        return [SAMPLES / "agent_run", SAMPLES / "bicycle", SAMPLES / "outage"]
    (root / "retry").mkdir(parents=True, exist_ok=True)
    write_traces(root / "dashboard.jsonl")
    write_retry_traces(root / "retry")
    third_party(root / "third_party.jsonl")
    return [root]


def load_duckdb(db_path: Path, paths: list[Path]) -> Path:
    with Analyzer(db_path) as analyzer:
        analyzer.set_write_tools(list(WRITE_TOOLS))
        analyzer.ingest(paths)
    return db_path


def load_chdb(client: Any, database: str, paths: list[Path], layout: str = "map") -> int:
    """Create ``database.otel_traces`` as the exporter does (its Map or JSON
    attribute layout) and fill it. Made afresh: a module fixture set up again in the
    same process (pytest-xdist may split a module between workers) must not append."""
    client.command(f"DROP DATABASE IF EXISTS {database}")
    client.command(f"CREATE DATABASE {database}")
    clickhouse_otel.create_table(client, f"{database}.otel_traces", layout)
    rows = clickhouse_otel.rows_from_files(resolve(paths), layout)
    clickhouse_otel.insert_rows(client, rows, f"{database}.otel_traces", layout)
    return len(rows)


def drop(backend: Backend, database: str, views: str | None = None) -> None:
    """Drop a test's database (its views' database first: their materialized
    views read its table)."""
    client = backend.client()
    try:
        for name in (views, database):
            if name:
                client.command(f"DROP DATABASE IF EXISTS {name}")
    finally:
        client.close()
