"""Records the OpenAI Agents SDK's traces through OpenInference
(``openinference-instrumentation-openai-agents``) for the scripted support
agent of ``scenario.json``, offline.

    .venv/bin/python -m tests.analyzer.instrumentations.record.py_openai_agents \\
        openai-agents-openinference on|off OUT

Prints ``{"traces": {trace_id: scenario}, "versions": {...}}`` as ``record_py``
does. The instrumentor replaces the SDK's own trace processors (its
``exclusive_processor`` default), so nothing is sent to OpenAI's trace
backend; the SDK's spans become OpenTelemetry spans on this provider. The model
is the SDK's own ``agents.testing.ScriptedModel`` (with ``emit_traces``: a
generation span per turn, as a real model has); the tools are
``function_tool``s. ``charge``'s ``TimeoutError`` goes to the model as an
error result (``failure_error_function``; the run goes on). The capture is
OpenInference's ``OPENINFERENCE_HIDE_INPUTS`` / ``_OUTPUTS`` (off: both
``true``), the conversation its ``using_session``.
"""

from __future__ import annotations

import asyncio
import json
import os
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

STACK = "openai-agents-openinference"


def _model(scenario: str, script: list[Call]) -> Any:
    """The SDK's ScriptedModel: one tool call per turn, then a final answer."""
    from agents.testing import ScriptedModel, assistant_message, function_call

    steps: list[Any] = [
        [function_call(tool, args, call_id=f"call_{scenario}_{n}")]
        for n, (tool, args) in enumerate(script)
    ]
    return ScriptedModel([*steps, [assistant_message("done")]], emit_traces=True)


def _tools(impl: Tools) -> list[Any]:
    from agents import function_tool

    # Plain functions with their own signatures: function_tool reads the schema
    # from them (a bound method's would do too, but its name is the method's).
    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return impl.get_order(order_id)

    def send_email(to: str, body: str) -> dict[str, Any]:
        """Send an e-mail."""
        return impl.send_email(to, body)

    def charge(order: str, amount: float) -> dict[str, Any]:
        """Charge an order."""
        return impl.charge(order, amount)

    return [
        function_tool(f, failure_error_function=_report_error)
        for f in (get_order, send_email, charge)
    ]


def _report_error(context: Any, error: Exception) -> str:
    """What the model is told of a failed tool: the exception, as an app that
    approves error details does. With the SDK's default (a fixed "An error
    occurred ..."), the span's error detail is redacted too, and a timeout
    looks like any failure."""
    return f"{type(error).__name__}: {error}"


def _run(scenario: str, script: list[Call]) -> None:
    from agents import Agent, RunConfig, Runner
    from openinference.instrumentation import using_session

    agent = Agent(name="support", model=_model(scenario, script), tools=_tools(Tools()))
    conversation = f"conv-{scenario}-{STACK}"
    config = RunConfig(workflow_name="support-agent", group_id=conversation)
    with using_session(conversation):
        run = Runner.run(agent, "Help the customer with order A1.", run_config=config, max_turns=50)
        asyncio.run(run)


def record(capture: str, out: Path) -> dict[str, Any]:
    # OITracer reads its TraceConfig from the environment when it is made.
    if capture == "off":
        os.environ["OPENINFERENCE_HIDE_INPUTS"] = "true"
        os.environ["OPENINFERENCE_HIDE_OUTPUTS"] = "true"
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    scenarios = Scenarios()
    provider = TracerProvider(resource=Resource.create({"service.name": f"support-agent-{STACK}"}))
    provider.add_span_processor(scenarios)
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
    trace.set_tracer_provider(provider)
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    for scenario, calls in SCENARIO["scenarios"].items():
        scenarios.current = scenario
        _run(scenario, [(tool, args) for tool, args in calls])
    provider.shutdown()
    names = ("openai-agents", "openinference-instrumentation-openai-agents", "opentelemetry-sdk")
    return {"traces": scenarios.traces, "versions": {name: version(name) for name in names}}


if __name__ == "__main__":
    stack, capture, out = sys.argv[1:4]
    assert stack == STACK, stack
    Path(out).unlink(missing_ok=True)
    print(json.dumps(record(capture, Path(out))))
