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
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from toolspan.serve._otlp import decompress, from_protobuf

from .record_py import SCENARIO, Call, Scenarios, Tools

STACK = "langfuse"
PACKAGES = ("langfuse", "openai", "opentelemetry-sdk")
# Far above one export of this script (a few KB): the receiver's inflate bound.
MAX_BODY = 16 * 1024 * 1024


@contextmanager
def receiver(out: Path) -> Iterator[str]:
    """An OTLP/HTTP (protobuf, identity or gzip) trace receiver on 127.0.0.1
    writing ``out``; its base URL."""
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            plain = decompress(body, self.headers.get("Content-Encoding", ""), MAX_BODY)
            line = from_protobuf(plain).line
            if line is not None:
                with lock, out.open("ab") as file:
                    file.write(line + b"\n")
            # An empty ExportTraceServiceResponse: everything was accepted.
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _model(scenario: str, script: list[Call]) -> Any:
    """Langfuse's openai client; the model is a transport answering from the script."""
    import httpx2
    from langfuse.openai import OpenAI

    turn = 0

    def handle(request: httpx2.Request) -> httpx2.Response:
        nonlocal turn
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if turn < len(script):
            tool, args = script[turn]
            call = {"name": tool, "arguments": json.dumps(args)}
            message["tool_calls"] = [
                {"id": f"call_{scenario}_{turn}", "type": "function", "function": call}
            ]
            finish = "tool_calls"
        else:
            message["content"], finish = "done", "stop"
        turn += 1
        body = {
            "id": f"chatcmpl-{scenario}-{turn}",
            "object": "chat.completion",
            "created": 1767600000,
            "model": "scripted-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return httpx2.Response(200, json=body)

    transport = httpx2.MockTransport(handle)
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

    @observe(name="support-agent", as_type="agent")
    def agent(question: str) -> str:
        messages: list[Any] = [{"role": "user", "content": question}]
        while True:
            reply = (
                client.chat.completions.create(
                    model="scripted-model", messages=messages, tools=advertised
                )
                .choices[0]
                .message
            )
            messages.append(reply.model_dump(exclude_none=True))
            if not reply.tool_calls:
                return str(reply.content)
            for call in reply.tool_calls:
                try:
                    result: Any = tools[call.function.name](**json.loads(call.function.arguments))
                except TimeoutError as error:
                    # As an app does: the timeout goes back to the model, the run goes on.
                    result = {"error": f"TimeoutError: {error}"}
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                )

    with propagate_attributes(session_id=f"conv-{scenario}-{STACK}"):
        agent("Help the customer with order A1.")


def record(capture: str, out: Path) -> dict[str, Any]:
    # observe() reads its default IO capture from the environment at each call.
    os.environ["LANGFUSE_OBSERVE_DECORATOR_IO_CAPTURE_ENABLED"] = str(capture == "on")
    from langfuse import Langfuse

    scenarios = Scenarios()
    provider = TracerProvider(resource=Resource.create({"service.name": f"support-agent-{STACK}"}))
    provider.add_span_processor(scenarios)
    with receiver(out) as url:
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
