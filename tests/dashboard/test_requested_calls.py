"""Calls the model only requested (no tool span ran them) are not failures on the trace list."""

from __future__ import annotations

from pathlib import Path

from tests.analyzer.instrumentations import fixture_spans
from toolspan.analyzer import Analyzer
from toolspan.dashboard import open_database
from toolspan.dashboard._queries import Filters, run_query

FIXTURE = fixture_spans("openai-openinference-on")


def test_requested_calls_are_not_counted_as_failed_on_the_trace_list(tmp_path: Path) -> None:
    with Analyzer(tmp_path / "t.duckdb") as analyzer:
        analyzer.ingest([FIXTURE])
    database = open_database(tmp_path / "t.duckdb")
    traces = run_query(database, "trace_list", {**Filters().params(), "limit": 200, "offset": 0})
    assert int(traces["calls"].sum()) == 15  # every call is a requested one
    assert int(traces["failed_calls"].sum()) == 0
