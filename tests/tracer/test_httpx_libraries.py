"""The httpx helpers speak httpx and httpx2 alike (the OpenAI and Anthropic SDKs use httpx2).

Each test runs once per library, through the library's real client and
MockTransport: a program that only has httpx2 needs no httpx, and the other way round.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from types import ModuleType

import httpx
import httpx2
import pytest

from toolspan.tracer import (
    Tool,
    ToolCall,
    ToolError,
    from_httpx,
    from_httpx_response,
    raise_for_httpx_status,
    send_idempotency_key,
    send_idempotency_key_async,
)

LIBRARIES = pytest.mark.parametrize("http", [httpx, httpx2], ids=["httpx", "httpx2"])


def _call() -> ToolCall:
    return ToolCall("pay", "c1", {"amount": 5}, "cv", request_id="r1", idempotency_key="key-1")


@LIBRARIES
def test_status_and_transport_errors_are_classified(make_executor, http: ModuleType):
    answers = iter(
        [
            http.Response(503, headers={"Retry-After": "2"}),
            http.ReadTimeout("slow"),
            http.Response(200, json={"paid": 5}),
        ]
    )
    sent: list[str | None] = []

    def handler(request):
        sent.append(request.headers.get("idempotency-key"))
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = http.Client(
        transport=http.MockTransport(handler),
        base_url="http://pay.test",
        event_hooks={"request": [send_idempotency_key()]},
    )

    def pay(amount: int) -> object:
        return raise_for_httpx_status(client.post("/pay", json={"amount": amount}))

    tool = Tool(
        "pay",
        pay,
        side_effect="write",
        idempotent=True,
        key_passed="Idempotency-Key header",
        keys_honoured=True,
    )
    result = make_executor([tool]).execute(_call())
    assert (result.status, result.attempts, result.data) == ("succeeded", 3, {"paid": 5})
    assert result.total_wait_s >= 2.0  # the 503's Retry-After was honoured
    assert sent == ["key-1"] * 3


@LIBRARIES
def test_from_httpx_maps_each_kind_of_exception(http: ModuleType):
    request = http.Request("GET", "http://x.test/")
    response = http.Response(429, headers={"Retry-After": "7"}, request=request)
    status_error = http.HTTPStatusError("429", request=request, response=response)
    mapped = {
        name: from_httpx(exc)
        for name, exc in {
            "timeout": http.ReadTimeout("slow"),
            "transport": http.RemoteProtocolError("cut"),
            "status": status_error,
            "other": ValueError("x"),
        }.items()
    }
    assert mapped["timeout"] is not None and mapped["timeout"].code == "timeout"
    assert mapped["transport"] is not None and mapped["transport"].code == "connection_error"
    assert mapped["status"] is not None and mapped["status"].code == "http_429"
    assert mapped["status"].retry_after_s == 7
    assert mapped["other"] is None
    error = from_httpx_response(http.Response(500), now=0)
    assert (error.code, error.message) == ("http_500", "HTTP 500 Internal Server Error")


@LIBRARIES
def test_the_async_hook_sends_the_key(make_executor, http: ModuleType):
    sent: list[str | None] = []

    def handler(request):
        sent.append(request.headers.get("idempotency-key"))
        return http.Response(200, json={})

    async def post() -> None:
        async with http.AsyncClient(
            transport=http.MockTransport(handler),
            event_hooks={"request": [send_idempotency_key_async()]},
        ) as client:
            await client.post("http://pay.test/pay")

    from toolspan.tracer._current import CURRENT_CALL

    token = CURRENT_CALL.set(_call())
    try:
        asyncio.run(post())
    finally:
        CURRENT_CALL.reset(token)
    asyncio.run(post())  # outside a call: no key
    assert sent == ["key-1", None]


def test_a_tool_error_is_not_taken_for_an_http_error():
    assert from_httpx(ToolError("timeout")) is None


def test_neither_library_is_imported_until_the_program_does():
    probe = (
        "import sys, toolspan.tracer\n"
        "from toolspan.tracer._adapters import to_tool_error\n"
        "assert to_tool_error(TimeoutError()).code == 'timeout'\n"
        "print(','.join(m for m in ('httpx', 'httpx2') if m in sys.modules))\n"
        "import httpx2\n"
        "print(to_tool_error(httpx2.ReadTimeout('slow')).code)\n"
        "print(','.join(m for m in ('httpx', 'httpx2') if m in sys.modules))\n"
    )
    printed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert printed == ["", "timeout", "httpx2"]
