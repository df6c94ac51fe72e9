"""Records the scripted support agent through the Langfuse Python SDK (5.x,
OpenTelemetry-based) and its own OTLP export, offline.

    .venv/bin/python -m tests.analyzer.instrumentations.record.py_langfuse langfuse on|off OUT

Prints ``{"traces": {trace_id: scenario}, "versions": {...}}`` as record_py does.
The Langfuse client exports with its own span processor (OTLP/HTTP protobuf,
gzip, to ``<base_url>/api/public/otel/v1/traces``): here ``base_url`` is an
OTLP/HTTP receiver on 127.0.0.1 started in this process, which turns each
request into one OTLP/JSON line with toolspan serve's own converter
(``toolspan.serve._otlp``, what ``toolspan serve`` does with the same bytes).

The agent is the app's own loop, traced the way Langfuse's users trace one:
``@observe(as_type="agent")`` on the run, ``@observe(as_type="tool")`` on each
tool, ``propagate_attributes(session_id=...)`` for the conversation, and the
model through Langfuse's drop-in openai client (``langfuse.openai``, generation
observations) over an ``httpx2.MockTransport`` answering from the script.
Capture ``off`` is ``LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED=false``, the
decorator's switch (no arguments, no return value); the openai integration has
no switch of its own, so its generations keep their messages.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from .record_py import (
    QUESTION,
    SCENARIO,
    Call,
    Scenarios,
    Tools,
    chat_loop,
    otlp_receiver,
    scripted_chat,
)

STACK = "langfuse"
PACKAGES = ("langfuse", "openai", "opentelemetry-sdk")


def _model(scenario: str, script: list[Call]) -> Any:
    """Langfuse's openai client; the model is a transport answering from the script."""
    import httpx2
    from langfuse.openai import OpenAI

    transport = httpx2.MockTransport(scripted_chat(scenario, script))
    return OpenAI(api_key="sk-test", http_client=httpx2.Client(transport=transport))


def _tools() -> dict[str, Callable[..., Any]]:
    from langfuse import observe

    impl = Tools()

    @observe(as_type="tool")
    def get_order(order_id: str) -> dict[str, Any]:
        return impl.get_order(order_id)

    @observe(as_type="tool")
    def send_email(to: str, body: str) -> dict[str, Any]:
        return impl.send_email(to, body)

    @observe(as_type="tool")
    def charge(order: str, amount: float) -> dict[str, Any]:
        return impl.charge(order, amount)

    return {"get_order": get_order, "send_email": send_email, "charge": charge}


def _run(scenario: str, script: list[Call]) -> None:
    from langfuse import observe, propagate_attributes

    client, tools = _model(scenario, script), _tools()
    advertised: Any = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in tools
    ]

    def create(messages: list[Any]) -> Any:
        return client.chat.completions.create(
            model="scripted-model", messages=messages, tools=advertised
        )

    @observe(name="support-agent", as_type="agent")
    def agent(question: str) -> str:
        return chat_loop(create, tools.__getitem__, question)

    with propagate_attributes(session_id=f"conv-{scenario}-{STACK}"):
        agent(QUESTION)


def record(capture: str, out: Path) -> dict[str, Any]:
    # observe() reads its default IO capture from the environment at each call.
    os.environ["LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED"] = str(capture == "on")
    from langfuse import Langfuse

    scenarios = Scenarios()
    provider = TracerProvider(resource=Resource.create({"service.name": f"support-agent-{STACK}"}))
    provider.add_span_processor(scenarios)
    with otlp_receiver(out) as url:
        # Any keys do: the receiver checks none. The client adds its own
        # LangfuseSpanProcessor (batching, OTLP/HTTP) to this provider.
        langfuse = Langfuse(
            public_key="pk-lf-test", secret_key="sk-lf-test", base_url=url, tracer_provider=provider
        )
        for scenario, calls in SCENARIO["scenarios"].items():
            scenarios.current = scenario
            _run(scenario, [(tool, args) for tool, args in calls])
        # Send the batch before the receiver stops.
        langfuse.shutdown()
    return {"traces": scenarios.traces, "versions": {name: version(name) for name in PACKAGES}}


if __name__ == "__main__":
    stack, capture, out = sys.argv[1:4]
    assert stack == STACK, stack
    Path(out).unlink(missing_ok=True)
    print(json.dumps(record(capture, Path(out))))
