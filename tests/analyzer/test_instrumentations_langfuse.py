"""A Langfuse SDK tool observation around toolspan's own call span.

test_instrumentations.py checks the recorded Langfuse fixtures (DuckDB and
ClickHouse), test_analyzer_coverage.py their coverage on both ClickHouse
layouts. What neither shows: a Langfuse ``@observe(as_type="tool")`` around
toolspan's boundary is one call (the richer toolspan span is kept): DuckDB
looks for such pairs only where a weak span (genai, openinference, vercel,
langfuse) was touched.
"""

from __future__ import annotations

from pathlib import Path

from toolspan.analyzer import Analyzer

from .conftest import Recorder
from .instrumentations import fixture_spans


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


def test_a_langfuse_tool_observations_arguments_fingerprint_as_the_tools_own() -> None:
    # Langfuse records the decorated function's bound parameters, {"args": [],
    # "kwargs": {...}}, where MLflow records the tool's own parameters: the
    # call's arguments are the kwargs, so each of its get_order calls is the
    # same call as MLflow's (the same script: orders A1, B2, C3).
    with Analyzer() as az:
        az.ingest([fixture_spans("langfuse-on"), fixture_spans("mlflow-on")])
        rows = az.query(
            "SELECT source, count(DISTINCT args_fingerprint), count(args_fingerprint)"
            " FROM tool_calls WHERE tool = 'get_order' GROUP BY ALL ORDER BY ALL"
        ).rows
        together = az.query(
            "SELECT count(DISTINCT args_fingerprint) FROM tool_calls WHERE tool = 'get_order'"
        ).rows
    assert [(source, distinct) for source, distinct, _ in rows] == [("langfuse", 3), ("mlflow", 3)]
    assert all(recorded > 0 for _, _, recorded in rows)
    assert together == [(3,)]
