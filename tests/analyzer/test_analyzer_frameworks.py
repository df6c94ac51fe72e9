"""Real spans from an agent framework (Pydantic AI driven offline by a scripted
FunctionModel), alone and behind toolspan's boundary, and the same call seen by
two instrumentations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from toolspan.analyzer import Analyzer
from toolspan.tracer.integrations import Declaration
from toolspan.tracer.integrations.pydantic_ai import RetryBoundary

from .conftest import Recorder


def _scripted_agent(tool_calls: list[dict[str, Any]], provider: TracerProvider) -> Agent[None, str]:
    """An agent whose model asks for the given tool calls, one per turn, then answers."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn < len(tool_calls):
            return ModelResponse(
                parts=[ToolCallPart("get_stock", tool_calls[turn], tool_call_id=f"t{turn}")]
            )
        return ModelResponse(parts=[TextPart("done")])

    agent: Agent[None, str] = Agent(FunctionModel(model))
    agent.instrument = InstrumentationSettings(tracer_provider=provider)

    @agent.tool_plain
    def get_stock(sku: str) -> dict[str, Any]:
        return {"sku": sku, "qty": 0}

    return agent


def test_pydantic_ai_loop_is_found_from_its_own_spans(tmp_path: Path) -> None:
    path = tmp_path / "pydantic_ai.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    # Conversation A: the model asks for the same stock three times (a loop).
    _scripted_agent([{"sku": "A1"}] * 3, provider).run_sync("stock?", conversation_id="conv-a")
    # Conversation B: the same call twice, then a different one (no loop).
    _scripted_agent([{"sku": "A1"}, {"sku": "A1"}, {"sku": "B2"}], provider).run_sync(
        "stock?", conversation_id="conv-b"
    )
    provider.shutdown()
    with Analyzer() as az:
        az.ingest([path])
        calls = az.query(
            "SELECT conversation_id, count(*), any_value(source)"
            " FROM tool_calls GROUP BY 1 ORDER BY 1"
        ).rows
        # The chat spans' message history repeats every call; it must not be counted.
        chats = az.query(
            "SELECT count(*) FROM spans WHERE attributes['gen_ai.operation.name'] = 'chat'"
        ).rows
        findings = az.findings()
    assert calls == [("conv-a", 3, "genai"), ("conv-b", 3, "genai")]
    assert chats == [(8,)]
    assert [(f.kind, f.conversation_id, f.tool, f.count) for f in findings] == [
        ("loop", "conv-a", "get_stock", 3)
    ]
    assert findings[0].detail["arguments"] == '{"sku":"A1"}'


def test_a_call_seen_by_two_instrumentations_counts_once(tmp_path: Path) -> None:
    rec = Recorder()
    with rec.conversation("c2"):
        for _ in range(3):
            # A framework's execute_tool span around toolspan's call span.
            with rec.span(
                "execute_tool search",
                scope="pydantic-ai",
                **{
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": '{"q": "x"}',
                },
            ):
                rec.toolspan_call("search", "c2", {"q": "x"}, result=1)
    Recorder.write(tmp_path / "t.jsonl", rec.take())
    with Analyzer() as az:
        az.ingest([tmp_path])
        sources = az.query("SELECT source, count(*) FROM tool_calls GROUP BY 1").rows
        loops = [f for f in az.findings() if f.kind == "loop"]
    assert sources == [("toolspan", 3)]
    assert [(f.tool, f.count) for f in loops] == [("search", 3)]


def test_pydantic_ai_behind_toolspans_boundary_counts_each_call_once(tmp_path: Path) -> None:
    """Real spans from both: Pydantic AI's execute_tool around toolspan's call span."""
    path = tmp_path / "guarded.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    agent = _scripted_agent([{"sku": "A1"}] * 3, provider)
    guarded = Agent(
        agent.model,  # the same scripted FunctionModel
        tools=[Tool(_get_stock, takes_ctx=False, name="get_stock")],
        capabilities=[RetryBoundary({"get_stock": Declaration.read()}, tracer_provider=provider)],
    )
    guarded.instrument = InstrumentationSettings(tracer_provider=provider)
    guarded.run_sync("stock?", conversation_id="conv-g")
    provider.shutdown()
    with Analyzer() as az:
        az.ingest([path])
        calls = az.query("SELECT source, tool, count(*) FROM tool_calls GROUP BY ALL").rows
        framework = az.query(
            "SELECT count(*) FROM spans WHERE name = 'execute_tool get_stock'"
            " AND scope_name <> 'toolspan'"
        ).rows
        loops = [(f.kind, f.conversation_id, f.count) for f in az.findings()]
    assert framework == [(3,)]  # Pydantic AI's own spans are there...
    assert calls == [("toolspan", "get_stock", 3)]  # ...and each call counts once
    assert loops == [("loop", "conv-g", 3)]


def _get_stock(sku: str) -> dict[str, Any]:
    return {"sku": sku, "qty": 0}
