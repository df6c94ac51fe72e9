"""Records Pydantic AI's OWN OpenTelemetry spans (the ones Logfire shows) for
the scripted support agent of ``scenario.json``, offline.

    .venv/bin/python -m tests.analyzer.instrumentations.record.py_pydantic_ai pydantic-ai on|off OUT

Prints ``{"traces": {trace_id: scenario}, "versions": {...}}`` as ``record_py``
does. ``Agent.instrument_all(InstrumentationSettings(...))`` turns the spans on
for every agent, as ``logfire.instrument_pydantic_ai()`` does (Logfire itself
only adds its exporter); the capture is ``include_content`` (on / off). The
model is Pydantic AI's own ``FunctionModel`` answering from the script; the
tools are real ``Tool`` functions.

A tool's exception is not the model's to see in Pydantic AI: the
``TimeoutError`` of ``charge`` ends ``agent.run`` (the tool span is status
ERROR with an ``exception`` event). The app asks again with the same
``conversation_id``, as a chat app's retry does, so one scenario is one
conversation (``gen_ai.conversation.id``) over several traces, as with
Google ADK.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from .record_py import SCENARIO, Call, Scenarios, Tools

STACK = "pydantic-ai"


def _model(scenario: str, queue: list[tuple[int, Call]]) -> Any:
    """Pydantic AI's FunctionModel: the script's next call, else a final answer."""
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if queue:
            n, (tool, args) = queue.pop(0)
            call = ToolCallPart(tool, args, tool_call_id=f"call_{scenario}_{n}")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond, model_name="scripted-model")


def _run(scenario: str, script: list[Call]) -> None:
    from pydantic_ai import Agent, Tool

    queue = list(enumerate(script))
    impl = Tools()
    tools: list[Tool[None]] = [
        Tool(getattr(impl, name), takes_ctx=False, name=name, description=name)
        for name in ("get_order", "send_email", "charge")
    ]
    agent = Agent(_model(scenario, queue), tools=tools, name="support")
    conversation = f"conv-{scenario}-{STACK}"
    # A tool's TimeoutError ends the run: the app retries the conversation
    # (the script goes on where it stopped) until the model has answered.
    while True:
        try:
            agent.run_sync("Help the customer with order A1.", conversation_id=conversation)
        except TimeoutError:
            continue
        return


def record(capture: str, out: Path) -> dict[str, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    scenarios = Scenarios()
    provider = TracerProvider(resource=Resource.create({"service.name": f"support-agent-{STACK}"}))
    provider.add_span_processor(scenarios)
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
    trace.set_tracer_provider(provider)
    settings = InstrumentationSettings(tracer_provider=provider, include_content=capture == "on")
    Agent.instrument_all(settings)
    for scenario, calls in SCENARIO["scenarios"].items():
        scenarios.current = scenario
        _run(scenario, [(tool, args) for tool, args in calls])
    provider.shutdown()
    versions = {name: version(name) for name in ("pydantic-ai-slim", "opentelemetry-sdk")}
    return {"traces": scenarios.traces, "versions": versions}


if __name__ == "__main__":
    stack, capture, out = sys.argv[1:4]
    assert stack == STACK, stack
    Path(out).unlink(missing_ok=True)
    print(json.dumps(record(capture, Path(out))))
