"""Langfuse SDK tool observations beside toolspan's own spans, and on the JSON layout.

test_instrumentations.py checks the recorded Langfuse fixtures (DuckDB and
ClickHouse's Map layout). What it cannot show: a Langfuse ``@observe(as_type=
"tool")`` around toolspan's boundary is one call (the richer toolspan span is
kept), and ClickHouse's JSON layout reads the observations alike.
"""

from __future__ import annotations

from pathlib import Path

from tests.clickhouse_backend import Backend
from toolspan.analyzer import Analyzer, ClickHouseAnalyzer

from .conftest import Recorder
from .test_analyzer_clickhouse import Table, _assert_same
from .test_instrumentations import _labels, _spans

FIXTURE = "langfuse-on"


def _observed_toolspan_calls(path: Path) -> Path:
    """Three searches, each a Langfuse tool observation (the attributes
    langfuse 5.2 writes) around toolspan's call span."""
    rec = Recorder()
    with rec.conversation("c-lf"):
        for _ in range(3):
            attributes = {
                "langfuse.observation.type": "tool",
                "langfuse.observation.input": '{"args": [], "kwargs": {"q": "x"}}',
                "langfuse.observation.output": "1",
            }
            with rec.span("search", scope="langfuse-sdk", **attributes):
                rec.toolspan_call("search", "c-lf", {"q": "x"}, result=1)
    return Recorder.write(path, rec.take())


def test_a_langfuse_tool_observation_around_toolspans_call_counts_once(tmp_path: Path) -> None:
    path = _observed_toolspan_calls(tmp_path / "observed.jsonl")
    with Analyzer() as az:
        az.ingest([path])
        sources = az.query("SELECT source, count(*) FROM tool_calls GROUP BY 1").rows
        loops = [(f.tool, f.count) for f in az.findings() if f.kind == "loop"]
    assert sources == [("toolspan", 3)]
    assert loops == [("search", 3)]


def test_langfuse_observations_read_alike_on_the_json_layout(
    clickhouse: Backend, tmp_path: Path
) -> None:
    # One table for both cases: loading and reading chDB is most of the time.
    paths = [_spans(FIXTURE), _observed_toolspan_calls(tmp_path / "observed.jsonl")]
    table = Table(clickhouse, "json")
    try:
        table.load(*paths)
        _assert_same(table, paths, write_tools=_labels(FIXTURE)["write_tools"])
        with ClickHouseAnalyzer(table.source) as az:
            calls = az.summary()["coverage"]["tool_calls"]
    finally:
        table.drop()
    assert calls == {"langfuse": 15, "toolspan": 3}
