"""Shared parts of the ``toolspan serve`` tests: a server on free ports, and
spans made by the real tracer and SDK."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from tests.services import free_port
from toolspan.serve import Server, Settings
from toolspan.tracer import Executor, Tool, ToolCall


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start ``toolspan serve`` in this process on free ports (no dashboard)."""
    started: list[Server] = []

    def start(**settings: Any) -> Server:
        values: dict[str, Any] = {
            "directory": tmp_path / "spool",
            "http_port": free_port(),
            "grpc_port": free_port(),
            "dashboard_port": 0,
            **settings,
        }
        server = Server(Settings(**values)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def http_url(server: Server, path: str = "/v1/traces") -> str:
    return f"http://127.0.0.1:{server.settings.http_port}{path}"


def send_writes(exporter: SpanExporter, conversation: str, *, times: int = 2) -> None:
    """The same write made ``times`` times in one conversation (a duplicate
    write), through the real tracer, exported by ``exporter`` span by span."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    send = Tool(name="send_email", fn=lambda to: {"sent": to}, side_effect="write")
    executor = Executor([send], tracer_provider=provider)
    for number in range(times):
        executor.execute(
            ToolCall("send_email", f"call-{number}", {"to": "a@b.c"}, conversation_id=conversation)
        )
    provider.shutdown()


def wait_for(check: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout_s} s: {check}")
        time.sleep(0.05)


def findings(server: Server, **params: str) -> list[dict[str, Any]]:
    response = httpx.get(http_url(server, "/api/v1/findings"), params=params)
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()["findings"]
    return found


def summary(server: Server) -> dict[str, Any]:
    response = httpx.get(http_url(server, "/api/v1/summary"))
    response.raise_for_status()
    value: dict[str, Any] = response.json()
    return value


def tool_request(trace: int, spans: int) -> bytes:
    """One OTLP/JSON request (a spool line) of ``spans`` GenAI tool spans in one trace."""
    items: list[dict[str, Any]] = [
        {
            "traceId": f"{trace:032x}",
            "spanId": f"{trace * 1000 + n:016x}",
            "name": "execute_tool lookup",
            "startTimeUnixNano": "1767225600000000000",
            "endTimeUnixNano": "1767225600001000000",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
                {"key": "gen_ai.conversation.id", "value": {"stringValue": f"c{trace}"}},
                {"key": "retries", "value": {"intValue": "2"}},
            ],
        }
        for n in range(spans)
    ]
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": items}]}]}
    return orjson.dumps(request)
