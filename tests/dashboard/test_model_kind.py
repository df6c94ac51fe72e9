"""The trace waterfall kinds the model spans of the SDKs as "model", whatever
the SDK calls them: by name (anthropic.messages.create, openai.chat, chat
gpt-4o) or by gen_ai.operation.name (chat, text_completion, generate_content)."""

from __future__ import annotations

from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from toolspan.analyzer import Analyzer
from toolspan.dashboard import open_database
from toolspan.dashboard._queries import run_query

BASE_NS = 1_767_225_600 * 10**9
MS = 1_000_000

# name -> (gen_ai.operation.name or None, the kind the waterfall must show)
SPANS: dict[str, tuple[str | None, str]] = {
    "anthropic.messages.create": (None, "model"),
    "openai.chat": (None, "model"),
    "chat gpt-4o": ("chat", "model"),
    "complete-once": ("text_completion", "model"),
    "gemini call": ("generate_content", "model"),
    "load_config": (None, "other"),
}


def _write(path: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("sdk.fixture")
    root = tracer.start_span(
        "invoke_agent refund-agent",
        start_time=BASE_NS,
        attributes={"gen_ai.operation.name": "invoke_agent"},
    )
    ctx = trace.set_span_in_context(root)
    now = BASE_NS + MS
    for name, (operation, _) in SPANS.items():
        attributes = {} if operation is None else {"gen_ai.operation.name": operation}
        span = tracer.start_span(name, context=ctx, start_time=now, attributes=attributes)
        span.end(end_time=now + MS)
        now += 2 * MS
    tool = tracer.start_span(
        "execute_tool lookup",
        context=ctx,
        start_time=now,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"},
    )
    tool.end(end_time=now + MS)
    root.end(end_time=now + 2 * MS)
    provider.shutdown()


def test_sdk_model_spans_are_kinded_model(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    _write(traces)
    db_path = tmp_path / "traces.duckdb"
    with Analyzer(db_path) as analyzer:
        analyzer.ingest([traces])
    duck = open_database(db_path)
    (trace_id,) = duck.execute("SELECT DISTINCT trace_id FROM spans").fetchone() or ("",)
    rows = run_query(
        duck,
        "trace_spans",
        {"trace_id": trace_id, "scope": "trace", "scope_id": "", "max_spans": 1000},
    )
    kinds = dict(zip(rows["name"], rows["category"], strict=True))
    assert kinds == {
        "invoke_agent refund-agent": "agent",
        "execute_tool lookup": "tool",
        **{name: kind for name, (_, kind) in SPANS.items()},
    }
