"""Records the scripted support agent through Microsoft Semantic Kernel's own
OpenTelemetry spans (Python ``semantic-kernel``), offline.

    $TOOLSPAN_SK_PYTHON -m tests.analyzer.instrumentations.record.py_semantic_kernel \
        semantic-kernel on|off OUT

Prints ``{"traces": {trace_id: scenario}, "versions": {...}}`` as record_py does.
semantic-kernel 1.45 wants ``mcp < 2`` and ``pydantic < 2.14`` (the dev venv has
mcp 2.3 and pydantic 2.14): it runs in a venv of its own (regenerate.py,
``TOOLSPAN_SK_PYTHON``), with the OTLP/JSON file exporter.

The agent is SK's ``ChatCompletionAgent`` with the tools as a plugin of
``@kernel_function`` methods and automatic function calling
(``FunctionChoiceBehavior.Auto``); the model is SK's ``OpenAIChatCompletion``
over an ``openai.AsyncOpenAI`` client whose ``httpx2.MockTransport`` answers
from the script. charge raises ``TimeoutError`` twice: SK records it on the
function's span and hands the model an error result (the run goes on).
Capture ``on`` is ``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE``,
``off`` ``..._ENABLE_OTEL_DIAGNOSTICS`` (diagnostics without content); both are
read when semantic_kernel is imported, so they are set first.
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

from .record_py import QUESTION, SCENARIO, Call, Scenarios, Tools, scripted_chat

STACK = "semantic-kernel"
PACKAGES = ("semantic-kernel", "openai", "opentelemetry-sdk")
# SK names a tool <plugin>-<function> (its fully qualified name), to the model
# and in gen_ai.tool.name.
PLUGIN = "support"


def _plugin() -> Any:
    from semantic_kernel.functions import KernelPlugin, kernel_function

    impl = Tools()

    class Support:
        """The scripted agent's tools as an SK plugin."""

        @kernel_function(description="Read an order.")
        def get_order(self, order_id: str) -> dict[str, Any]:
            return impl.get_order(order_id)

        @kernel_function(description="Send an e-mail.")
        def send_email(self, to: str, body: str) -> dict[str, Any]:
            return impl.send_email(to, body)

        @kernel_function(description="Charge an order.")
        def charge(self, order: str, amount: float) -> dict[str, Any]:
            return impl.charge(order, amount)

    return KernelPlugin.from_object(PLUGIN, Support())


def _run(scenario: str, script: list[Call]) -> None:
    import httpx2
    import openai
    from semantic_kernel.agents import ChatCompletionAgent
    from semantic_kernel.connectors.ai import FunctionChoiceBehavior
    from semantic_kernel.connectors.ai.open_ai import (
        OpenAIChatCompletion,
        OpenAIChatPromptExecutionSettings,
    )
    from semantic_kernel.functions import KernelArguments

    client = openai.AsyncOpenAI(
        api_key="sk-test",
        http_client=httpx2.AsyncClient(
            transport=httpx2.MockTransport(scripted_chat(scenario, script, f"{PLUGIN}-"))
        ),
    )
    settings = OpenAIChatPromptExecutionSettings(
        function_choice_behavior=FunctionChoiceBehavior.Auto(
            # The script's 9 calls, one per model turn (SK's default stops at 5).
            auto_invoke=True,
            maximum_auto_invoke_attempts=len(script) + 1,
        )
    )
    agent = ChatCompletionAgent(
        service=OpenAIChatCompletion(ai_model_id="scripted-model", async_client=client),
        name="support",
        plugins=[_plugin()],
        arguments=KernelArguments(settings=settings),
    )

    async def run() -> None:
        await agent.get_response(messages=QUESTION)

    asyncio.run(run())


def record(capture: str, out: Path) -> dict[str, Any]:
    switch = "ENABLE_OTEL_DIAGNOSTICS_SENSITIVE" if capture == "on" else "ENABLE_OTEL_DIAGNOSTICS"
    os.environ[f"SEMANTICKERNEL_EXPERIMENTAL_GENAI_{switch}"] = "true"
    scenarios = Scenarios()
    provider = TracerProvider(resource=Resource.create({"service.name": f"support-agent-{STACK}"}))
    provider.add_span_processor(scenarios)
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
    # SK's tracers come from the global provider.
    trace.set_tracer_provider(provider)
    for scenario, calls in SCENARIO["scenarios"].items():
        scenarios.current = scenario
        _run(scenario, [(tool, args) for tool, args in calls])
    provider.shutdown()
    return {"traces": scenarios.traces, "versions": {name: version(name) for name in PACKAGES}}


if __name__ == "__main__":
    stack, capture, out = sys.argv[1:4]
    assert stack == STACK, stack
    Path(out).unlink(missing_ok=True)
    print(json.dumps(record(capture, Path(out))))
