"""The dashboard shows the analyzer's coverage (issue 39): a caption on the
overview, and, where no tool call was recognised, the figures that tell GenAI
spans whose calls were not recognised from spans with nothing GenAI about them.
Plain text: only figures and the analyzer's own source names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from toolspan.analyzer import Analyzer
from toolspan.analyzer._render import coverage_line
from toolspan.dashboard import _ui

from .traces import write_traces

APP = Path(__file__).parents[2] / "dashboard" / "app.py"
# Real LLM spans (the openai client + OpenLLMetry, content capture off) that
# carry no tool call in any form (tests/analyzer/test_analyzer_coverage.py).
NO_CALLS = Path(__file__).parents[1] / "analyzer" / "instrumentations" / "openai-openllmetry-off"


def _ingest(db: Path, *paths: Path) -> dict[str, Any]:
    with Analyzer(db) as az:
        az.ingest(list(paths))
        cover: dict[str, Any] = az.summary()["coverage"]
        return cover


def _start(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(_ui.DB_ENV, str(db))
    app = AppTest.from_file(APP, default_timeout=30).run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_the_overview_shows_the_coverage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cover = _ingest(tmp_path / "t.duckdb", write_traces(tmp_path / "t.jsonl"))
    assert set(cover["tool_calls"]) == {"toolspan"}
    app = _start(tmp_path / "t.duckdb", monkeypatch)
    captions = [c.value for c in app.caption if c.value.startswith("Coverage:")]
    assert captions == [f"Coverage: {coverage_line(cover)}"]
    assert f"tool calls: {cover['tool_calls']['toolspan']:,} toolspan;" in captions[0]


def test_a_database_of_genai_spans_without_a_recognised_call_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ingest(tmp_path / "llm.duckdb", NO_CALLS / "spans.jsonl")
    message = _start(tmp_path / "llm.duckdb", monkeypatch).info[0].value
    assert "19 spans but no tool spans" in message
    assert (
        "Coverage: 19 spans read, 17 GenAI-looking (17 in traces without a tool call);"
        " tool calls: none recognised;"
    ) in message
    assert "docs/analyzer.md#coverage" in message
