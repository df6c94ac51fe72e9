"""The MCP boundary against a server that misbehaves on purpose: raw JSON-RPC
over the real ``mcp`` client's stdio transport (tests/integrations/hostile_mcp_server.py).
Whatever the server sends, the agent gets a structured result or a clear
error, in bounded time, and the client never fetches what the server points at."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from toolspan.tracer import AsyncExecutor, ConfigurationError
from toolspan.tracer.integrations import mcp as mcp_adapter
from toolspan.tracer.integrations.mcp import GuardedSession, mcp_tools

from ..services import recording_http_server

pytestmark = pytest.mark.slow  # each test starts the server as a process

SERVER = Path(__file__).with_name("hostile_mcp_server.py")
MAX_RESULT_BYTES = 16 * 1024
LIMIT_S = 20.0  # a hang fails the test instead of holding the suite


def _server(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVER), *args])


async def _open(client: Client, spans: Any, **options: Any) -> GuardedSession:
    def executor(tools: list[Any]) -> AsyncExecutor:
        return AsyncExecutor(
            tools, tracer_provider=spans.provider, max_result_bytes=MAX_RESULT_BYTES
        )

    options.setdefault("timeout_s", 2.0)
    return await GuardedSession.open(client.session, executor, conversation_id="cv", **options)


def _call(spans: Any, tool: str, **options: Any) -> Any:
    async def test() -> Any:
        with anyio.fail_after(LIMIT_S):
            async with Client(_server("tools"), mode="legacy") as client:
                guarded = await _open(client, spans, **options)
                return await guarded.call_tool(tool, {})

    return anyio.run(test)


# -- item 1: an error is capped like a success ----------------------------------------


def test_a_huge_error_result_is_capped_like_a_success(spans):
    result = _call(spans, "huge_error")
    payload = result.structured_content
    assert result.is_error and payload["error_code"] == "mcp_tool_error"
    assert len(payload["message"].encode()) <= MAX_RESULT_BYTES + 100
    assert "END" not in payload["message"]
    for span in spans.all():
        assert len((span.status.description or "").encode()) <= MAX_RESULT_BYTES + 100


# -- item 2: structured content past 64 bits ------------------------------------------


def test_structured_content_past_64_bits_is_a_result(spans):
    result = _call(spans, "big_int")
    payload = result.structured_content
    assert not result.is_error and payload["status"] == "succeeded"
    assert payload["data"] == {"n": str(2**70)}
    assert json.loads(result.content[0].text)["data"] == {"n": str(2**70)}


# -- item 3: a malformed result --------------------------------------------------------


@pytest.mark.parametrize("tool", ["bad_type", "bad_flag"])
def test_a_malformed_result_is_a_classified_error(spans, tool):
    result = _call(spans, tool)
    payload = result.structured_content
    assert result.is_error and payload["status"] == "permanent_error"
    assert payload["error_code"] == "mcp_invalid_result"
    assert "\n" not in payload["message"] and len(payload["message"]) < 300


# -- item 4: pagination that never ends -------------------------------------------------


def _refused(mode: str, *args: str, spans: Any = None) -> BaseException:
    """What opening a session on the server raised (caught inside the client's
    task group, which would wrap it in an ExceptionGroup)."""

    async def test() -> BaseException:
        with anyio.fail_after(LIMIT_S):
            async with Client(_server(mode, *args), mode="legacy") as client:
                with pytest.raises(ConfigurationError) as refused:
                    if spans is None:
                        await mcp_tools(client.session)
                    else:
                        await _open(client, spans)
                return refused.value

    return anyio.run(test)


@pytest.mark.parametrize("mode", ["cursor-repeat", "cursor-new"])
def test_a_listing_that_never_ends_is_a_clear_error(mode):
    assert "tools/list" in str(_refused(mode))


# -- item 5: a $ref the server chose is never fetched ------------------------------------


@pytest.fixture
def schema_host() -> Iterator[tuple[str, list[str]]]:
    with recording_http_server() as (base, seen):
        yield f"{base}/schema.json", seen


def test_a_remote_ref_in_an_input_schema_is_never_fetched(spans, schema_host):
    url, seen = schema_host
    assert "$ref" in str(_refused("ref", url, spans=spans))
    assert seen == []


def test_a_file_ref_in_an_input_schema_is_never_read(spans, tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"enum": ["hunter2-from-the-disk"]}')
    refused = _refused("ref", secret.as_uri(), spans=spans)
    assert "$ref" in str(refused) and "hunter2" not in str(refused)


# -- item 6: a server that never answers -------------------------------------------------


def test_the_default_timeout_is_finite_and_ends_a_silent_call(spans, monkeypatch):
    default = mcp_adapter.DEFAULT_TIMEOUT_S
    assert math.isfinite(default) and default > 0
    # The default is read when the session opens: shortened here so the test is quick.
    monkeypatch.setattr(mcp_adapter, "DEFAULT_TIMEOUT_S", 0.3)

    async def test() -> Any:
        with anyio.fail_after(LIMIT_S):
            async with Client(_server("tools"), mode="legacy") as client:
                guarded = await GuardedSession.open(
                    client.session,
                    lambda tools: AsyncExecutor(tools, tracer_provider=spans.provider),
                    conversation_id="cv",
                )
                return await guarded.call_tool("silent", {})

    result = anyio.run(test)
    payload = result.structured_content
    # An undeclared tool is a write: timed out once, its outcome is unknown.
    assert result.is_error and payload["status"] == "unsafe_retry"
    (attempt,) = spans.attempts()
    assert spans.attrs(attempt)["toolspan.attempt.outcome"] == "timeout"


@pytest.mark.parametrize("timeout_s", [0, -1, math.nan, math.inf, "5"])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused(timeout_s):
    async def test() -> None:
        await mcp_tools(None, timeout_s=timeout_s)  # type: ignore[arg-type]

    with pytest.raises(ConfigurationError, match="timeout_s"):
        anyio.run(test)
