"""Records the scripted support agent through Microsoft Agent Framework's own
OpenTelemetry spans (``agent-framework-core``), offline.

    .venv/bin/python -m tests.analyzer.instrumentations.record.py_ms_agent_framework \
        ms-agent-framework on|off OUT

Prints ``{"traces": {trace_id: scenario}, "versions": {...}}`` as record_py does.
The framework's observability setup (``configure_otel_providers``) makes the
tracer provider, with the OTLP/JSON file exporter as its one span exporter;
capture ``on`` is its ``enable_sensitive_data`` (``ENABLE_SENSITIVE_DATA``), off
by default. The model is a scripted chat client built from the framework's own
layers (function invocation, chat telemetry) over ``BaseChatClient``, answering
from the script; the tools are real ``@tool`` functions, charge raising
``TimeoutError`` twice, which the framework's tool loop hands back to the model
as an error result (the run goes on).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider

from .record_py import SCENARIO, Call, Scenarios, Tools

PACKAGES = ("agent-framework-core", "opentelemetry-sdk")


def _client(scenario: str, script: list[Call]) -> Any:
    """A chat client that answers each turn with the script's next tool call."""
    from agent_framework import (
        BaseChatClient,
        ChatResponse,
        Content,
        FunctionInvocationLayer,
        Message,
    )
    from agent_framework.observability import ChatTelemetryLayer

    queue = list(enumerate(script))

    class ScriptedChatClient(
        FunctionInvocationLayer[Any], ChatTelemetryLayer[Any], BaseChatClient[Any]
    ):
        """The layers of the framework's own clients (as OpenAIChatClient), over a script."""

        OTEL_PROVIDER_NAME = "scripted"

        async def _inner_get_response(
            self, *, messages: Sequence[Any], stream: bool, options: Any, **kwargs: Any
        ) -> Any:
            if queue:
                n, (tool, args) = queue.pop(0)
                call = Content.from_function_call(f"call_{scenario}_{n}", tool, arguments=args)
                reply = Message(role="assistant", contents=[call])
            else:
                reply = Message(role="assistant", contents=[Content.from_text("done")])
            turn = f"resp-{scenario}-{len(queue)}"
            return ChatResponse(messages=[reply], response_id=turn, model="scripted-model")

    return ScriptedChatClient()


def _run(stack: str, scenario: str, script: list[Call]) -> None:
    from agent_framework import Agent, tool

    impl = Tools()

    @tool
    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return impl.get_order(order_id)

    @tool
    def send_email(to: str, body: str) -> dict[str, Any]:
        """Send an e-mail."""
        return impl.send_email(to, body)

    @tool
    def charge(order: str, amount: float) -> dict[str, Any]:
        """Charge an order."""
        return impl.charge(order, amount)

    agent = Agent(
        client=_client(scenario, script),
        name="support",
        tools=[get_order, send_email, charge],
    )
    # A service session id is what the framework writes as gen_ai.conversation.id.
    session = agent.get_session(f"conv-{scenario}-{stack}")

    async def run() -> None:
        await agent.run("Help the customer with order A1.", session=session)

    asyncio.run(run())


def record(stack: str, capture: str, out: Path) -> dict[str, Any]:
    from agent_framework.observability import configure_otel_providers

    configure_otel_providers(
        service_name=f"support-agent-{stack}",
        exporters=[FileSpanExporter(str(out))],
        enable_sensitive_data=capture == "on",
    )
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    scenarios = Scenarios()
    provider.add_span_processor(scenarios)
    for scenario, calls in SCENARIO["scenarios"].items():
        scenarios.current = scenario
        _run(stack, scenario, [(tool, args) for tool, args in calls])
    provider.shutdown()
    return {"traces": scenarios.traces, "versions": {name: version(name) for name in PACKAGES}}


if __name__ == "__main__":
    stack, capture, out = sys.argv[1:4]
    Path(out).unlink(missing_ok=True)
    print(json.dumps(record(stack, capture, Path(out))))
