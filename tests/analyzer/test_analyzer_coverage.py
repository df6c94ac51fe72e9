"""The summary's coverage and the "silent zero" (issue 39): when GenAI spans
arrive but no tool call is recognised in them, "0 findings" means the analyzer
understood nothing. `toolspan analyze` says so on stderr, and `--fail-on`
fails on it unless `--allow-empty`; the coverage figures are the same on
DuckDB and ClickHouse (chDB).

The "nothing recognised" inputs are real spans that carry no tool call in ANY
form: the openai client's LLM spans recorded with content capture off (no tool
names, no arguments, no messages: ``*-off`` fixtures, checked below), and a
real Pydantic AI run whose model answers in text. Not the ``openai-*-on``
fixtures: their LLM spans hold the model's requested calls, which the analyzer
is to read as calls (source ``requested``).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tests.clickhouse_backend import Backend
from toolspan.analyzer import Analyzer, ClickHouseAnalyzer
from toolspan.analyzer._render import coverage_line, summary_text
from toolspan.cli import main

from .instrumentations import FOLDERS, fixture_spans
from .test_analyzer_clickhouse import LAYOUTS, Table

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
# LLM spans with content capture off: no tool call in any form (17 LLM spans
# and the app's own span per fixture; the tools themselves are not instrumented).
NOTHING = ("openai-openinference-off", "openai-openllmetry-off")
# Each fixture whose tool spans the analyzer reads: (source, calls, calls
# whose arguments were not recorded): capture off records none (Strands'
# arguments are read from its span events when on).
STACKS = {
    "google-adk": "genai",
    "langchain-openinference": "openinference",
    "langchain-openllmetry": "genai",
    "mlflow": "mlflow",
    "strands": "genai",
    "vercel-ai-4": "vercel",
    "vercel-ai-5": "vercel",
    "vercel-ai-6": "vercel",
}
RECOGNISED: dict[str, tuple[str, int, int]] = {
    f"{stack}-{capture}": (source, 15, 15 if capture == "off" else 0)
    for stack, source in STACKS.items()
    for capture in ("on", "off")
}
WARNING = "GenAI span(s) read, no tool call recognised"
FAILING = "--fail-on: failing, no tool call recognised in"


def _attributes(path: Path) -> list[dict[str, Any]]:
    """Every span's attributes in an OTLP/JSON file, as {key: value}."""
    text = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
    return [
        {a["key"]: next(iter(a["value"].values()), None) for a in span.get("attributes", [])}
        for line in text.splitlines()
        if line.strip()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _summary(*paths: Path) -> dict[str, Any]:
    with Analyzer() as az:
        az.ingest(list(paths))
        return az.summary()


def _text_only_agent_run(path: Path, conversations: int = 2) -> Path:
    """A real Pydantic AI run (offline, a FunctionModel) whose model answers in
    text: chat and invoke_agent spans, and no tool call in any form."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("It is sunny in Oslo.")])

    agent: Agent[None, str] = Agent(FunctionModel(model))
    agent.instrument = InstrumentationSettings(tracer_provider=provider)
    for n in range(conversations):
        agent.run_sync("Weather in Oslo?", conversation_id=f"conv-{n}")
    provider.shutdown()
    return path


def _http_spans(path: Path) -> Path:
    """Plain HTTP client spans (a service with nothing GenAI about it)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    tracer = provider.get_tracer("opentelemetry.instrumentation.httpx")
    for n in range(3):
        with tracer.start_as_current_span("GET") as span:
            span.set_attributes({"http.request.method": "GET", "url.full": f"https://x/{n}"})
            span.set_attribute("http.response.status_code", 200)
    provider.shutdown()
    return path


# -- the silent zero ------------------------------------------------------------------


@pytest.mark.parametrize("folder", NOTHING)
def test_the_capture_off_llm_spans_carry_no_tool_call_in_any_form(folder: str) -> None:
    # Why these fixtures are the "nothing recognised" case: no attribute names a
    # tool or holds a message, and OpenInference's values are its placeholder.
    spans = _attributes(fixture_spans(folder))
    keys = {key for attributes in spans for key in attributes}
    assert not [k for k in keys if "tool" in k or "message" in k], keys
    values = {a[k] for a in spans for k in ("input.value", "output.value") if k in a}
    assert values <= {"__REDACTED__"}


@pytest.mark.parametrize("folder", NOTHING)
def test_genai_spans_with_no_call_recognised_warn_and_fail_the_gate(
    folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(fixture_spans(folder))
    assert main(["analyze", path, "--fail-on", "any"]) == 1
    err = capsys.readouterr().err
    assert f"17 {WARNING}" in err
    assert "docs/analyzer.md#coverage" in err
    assert f"{FAILING} 17 GenAI span(s); --allow-empty accepts that" in err
    assert main(["analyze", path, "--fail-on", "any", "--allow-empty"]) == 0
    err = capsys.readouterr().err
    assert f"17 {WARNING}" in err and FAILING not in err
    # Without a gate: the warning, and success.
    assert main(["analyze", path]) == 0
    err = capsys.readouterr().err
    assert WARNING in err and FAILING not in err
    # A gate on one kind fails too: the kind could not have been found.
    assert main(["analyze", path, "--fail-on", "loop"]) == 1


@pytest.mark.parametrize("folder", NOTHING)
def test_json_output_stays_pure_json_and_carries_the_coverage(
    folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["analyze", str(fixture_spans(folder)), "--format", "json", "--fail-on", "any"]) == 1
    )
    printed = capsys.readouterr()
    out = json.loads(printed.out)
    assert out["findings"] == []
    assert out["summary"]["coverage"] == {
        "spans": 19,
        "tool_calls": {},
        "genai_spans": 17,
        "genai_spans_without_calls": 17,
        "unverifiable_calls": 0,
    }
    assert WARNING in printed.err and FAILING in printed.err


def test_a_real_agent_run_without_tool_calls_is_a_silent_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _text_only_agent_run(tmp_path / "pydantic_ai.jsonl")
    summary = _summary(path)
    assert summary["coverage"] == {
        "spans": 4,  # per run: invoke_agent and one chat span
        "tool_calls": {},
        "genai_spans": 4,
        "genai_spans_without_calls": 4,
        "unverifiable_calls": 0,
    }
    assert main(["analyze", str(path), "--fail-on", "any", "--format", "markdown"]) == 1
    printed = capsys.readouterr()
    assert f"4 {WARNING}" in printed.err
    assert "| tool calls | 0 |" in printed.out


def test_spans_with_nothing_genai_about_them_are_not_a_silent_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _http_spans(tmp_path / "http.jsonl")
    assert _summary(path)["coverage"] == {
        "spans": 3,
        "tool_calls": {},
        "genai_spans": 0,
        "genai_spans_without_calls": 0,
        "unverifiable_calls": 0,
    }
    assert main(["analyze", str(path), "--fail-on", "any"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_calls_recognised_in_some_traces_are_no_silent_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # One service's tool spans are read, another's LLM spans hold none: the
    # figure says how many GenAI spans lie in traces without a call; no warning
    # (a chat that needs no tool is an ordinary trace).
    paths = [fixture_spans("vercel-ai-5-on"), fixture_spans("openai-openllmetry-off")]
    cover = _summary(*paths)["coverage"]
    assert cover["tool_calls"] == {"vercel": 15}
    assert (cover["genai_spans"], cover["genai_spans_without_calls"]) == (34 + 17, 17)
    assert main(["analyze", *map(str, paths), "--fail-on", "any"]) == 1  # vercel's loops
    assert WARNING not in capsys.readouterr().err


# -- the figures ----------------------------------------------------------------------


@pytest.mark.parametrize("folder", sorted(RECOGNISED))
def test_recognised_calls_are_counted_per_source_without_a_warning(
    folder: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source, calls, unverifiable = RECOGNISED[folder]
    summary = _summary(fixture_spans(folder))
    cover = summary["coverage"]
    assert cover["tool_calls"] == {source: calls}
    assert cover["unverifiable_calls"] == unverifiable == summary["unverifiable"]
    assert cover["spans"] == summary["spans"]
    # Every span of these recordings is the library's own GenAI span.
    assert cover["genai_spans"] == summary["spans"]
    main(["analyze", str(fixture_spans(folder)), "--fail-on", "any"])
    assert WARNING not in capsys.readouterr().err


def test_toolspans_own_spans_and_attempts() -> None:
    with Analyzer() as az:
        az.ingest([SAMPLES])
        summary = az.summary()
        attempt_spans = az.query("SELECT count(*) FROM attempts").rows[0][0]
    cover = summary["coverage"]
    # Attempt spans are parts of their call, not calls of their own.
    assert attempt_spans > 0
    assert cover["tool_calls"] == {"toolspan": summary["calls"]}
    assert cover["genai_spans_without_calls"] == 0
    assert "tool calls from toolspan" in summary_text(summary)
    line = coverage_line(cover)
    assert f"{summary['calls']:,} toolspan" in line
    assert coverage_line({**cover, "tool_calls": {}}).count("none recognised") == 1


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sets(st.sampled_from(FOLDERS), min_size=1, max_size=4))
def test_coverage_adds_up_over_fixtures(folders: set[str]) -> None:
    # The fixtures share no trace: the coverage of several is the sum of each's.
    each = [_summary(fixture_spans(f))["coverage"] for f in sorted(folders)]
    together = _summary(*(fixture_spans(f) for f in sorted(folders)))["coverage"]
    for figure in ("spans", "genai_spans", "genai_spans_without_calls", "unverifiable_calls"):
        assert together[figure] == sum(c[figure] for c in each)
    sources = {s for c in each for s in c["tool_calls"]}
    assert together["tool_calls"] == {
        s: sum(c["tool_calls"].get(s, 0) for c in each) for s in sorted(sources)
    }
    assert together["genai_spans_without_calls"] <= together["genai_spans"] <= together["spans"]


# -- DuckDB == ClickHouse ---------------------------------------------------------------


@pytest.fixture
def layout() -> str:
    return "map"


@pytest.fixture
def table(clickhouse: Backend, layout: str) -> Iterator[Table]:
    created = Table(clickhouse, layout)
    try:
        yield created
    finally:
        created.drop()


def _same_coverage(table: Table, paths: list[Path]) -> dict[str, Any]:
    duck = _summary(*paths)["coverage"]
    with ClickHouseAnalyzer(table.source) as az:
        cover = az.summary()["coverage"]
    assert cover.pop("spans") == table.count()  # rows as stored, as the summary's `spans`
    assert duck.pop("spans") > 0
    assert cover == duck
    return cover


# Every fixture's coverage on ClickHouse (both layouts) is checked with its
# findings, all fixtures in one table: test_instrumentations.py's
# test_clickhouse_gives_the_duckdb_answers_over_every_fixture.


@pytest.mark.parametrize("layout", LAYOUTS)
def test_clickhouse_coverage_of_a_silent_zero_counts_each_span_once(
    table: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [_text_only_agent_run(tmp_path / "a.jsonl"), _http_spans(tmp_path / "h.jsonl")]
    first = table.load(*paths)
    table.load(*paths)  # the collector retried the export
    assert table.count() == 2 * first
    cover = _same_coverage(table, paths)
    assert (cover["genai_spans"], cover["genai_spans_without_calls"]) == (4, 4)
    assert main(["analyze", table.source, "--fail-on", "any"]) == 1
    err = capsys.readouterr().err
    assert f"4 {WARNING}" in err and FAILING in err
    assert main(["analyze", table.source, "--fail-on", "any", "--allow-empty"]) == 0


def test_clickhouse_coverage_reads_the_same_from_inits_copies(table: Table) -> None:
    paths = [fixture_spans("vercel-ai-5-on"), fixture_spans("openai-openinference-off")]
    table.load(*paths)
    table.init()
    with ClickHouseAnalyzer(table.source) as az:
        assert az.copies == table.views
    cover = _same_coverage(table, paths)
    assert cover["tool_calls"] == {"vercel": 15}
    assert cover["genai_spans_without_calls"] == 17
