"""Issue 41 with the real `mcp` SDK on both sides: a task that asks for input completes
through the proxy as it does directly (stdio and streamable HTTP)."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client._input_required import run_input_required_driver
from mcp.client.session import ClientRequestContext

from toolspan.tracer.integrations.mcp_proxy import (
    McpProxy,
    http_app,
    http_upstream,
    parse_config,
    stdio_upstream,
)
from toolspan.tracer.integrations.mcp_proxy._memory import ThroughProxy

from .mcp_task_server import (
    QUESTION,
    TASK_RESULT,
    Jobs,
    TaskResultParams,
    TaskResultRequest,
    task_server,
)
from .test_mcp_proxy import REPO, uvicorn_serving

MODERN = "2026-07-28"  # the SDK runs the tasks extension on the stateless protocol
TASKS = {"timeout_s": 5, "tools": {"approve_shipment": {"side_effect": "write", "task": True}}}
SERVER = [sys.executable, "-m", "tests.integrations.mcp_task_server"]


class User:
    """The client's elicitation callback: what it was asked, when, and its answer."""

    def __init__(self, ok: bool = True) -> None:
        self.ok = ok
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, ctx: Any, params: Any) -> mcp_types.ElicitResult:
        self.asked.append((params.message, time.time_ns()))
        return mcp_types.ElicitResult(action="accept", content={"ok": self.ok})


async def run_task_directly(client: Client, order_id: str) -> mcp_types.CallToolResult:
    """What a client of the tasks extension does: start the task, poll it, and on
    ``input_required`` call ``tasks/result``, fulfilling its input (the SDK's driver)."""
    params = mcp_types.CallToolRequestParams(
        name="approve_shipment",
        arguments={"order_id": order_id},
        task=mcp_types.TaskMetadata(ttl=60_000),
    )
    session = client.session
    created = await session.send_request(
        mcp_types.CallToolRequest(params=params), mcp_types.CreateTaskResult
    )
    task_id = created.task.task_id
    get = mcp_types.GetTaskRequest(params=mcp_types.GetTaskRequestParams(task_id=task_id))
    while (await session.send_request(get, mcp_types.GetTaskResult)).status == "working":
        await anyio.sleep(0.01)

    async def fetch(responses: Any, state: str | None) -> Any:
        request = TaskResultRequest(
            params=TaskResultParams(task_id=task_id, input_responses=responses, request_state=state)
        )
        return await session.send_request(request, TASK_RESULT)

    async def dispatch(key: str, request: Any) -> Any:
        ctx = ClientRequestContext(session=session, request_id=key, meta=None)
        return await session.dispatch_input_request(ctx, request)

    first = await fetch(None, None)
    if not isinstance(first, mcp_types.InputRequiredResult):
        return first
    result: mcp_types.CallToolResult = await run_input_required_driver(
        first, dispatch=dispatch, retry=fetch
    )
    return result


@asynccontextmanager
async def over_stdio(jobs: Jobs, spans: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The server as a process: the direct client's transport, and the proxy's."""
    direct = StdioServerParameters(command=SERVER[0], args=SERVER[1:], cwd=str(REPO))
    proxy = McpProxy(
        stdio_upstream(SERVER[0], SERVER[1:], cwd=str(REPO)),
        parse_config(TASKS),
        tracer_provider=spans.provider,
    )
    yield (lambda: direct), (lambda: ThroughProxy(proxy))


@asynccontextmanager
async def over_http(jobs: Jobs, spans: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The server and the proxy on streamable HTTP (SSE answers: the SDK's default)."""
    async with uvicorn_serving(task_server(jobs).streamable_http_app()) as upstream_url:
        proxy = McpProxy(
            http_upstream(upstream_url),
            parse_config(TASKS),
            http_upstream=True,
            tracer_provider=spans.provider,
        )
        async with uvicorn_serving(http_app(proxy)) as proxy_url:
            yield (lambda: upstream_url), (lambda: proxy_url)


@pytest.mark.slow
@pytest.mark.parametrize("serving", [over_stdio, over_http], ids=["stdio", "http"])
def test_a_task_that_asks_for_input_completes_through_the_proxy_as_directly(spans, serving):
    jobs = Jobs()
    direct_user, proxied_user = User(), User()

    async def test() -> tuple[Any, Any]:
        async with serving(jobs, spans) as (direct, proxied):
            async with Client(direct(), mode=MODERN, elicitation_callback=direct_user) as client:
                direct_result = await run_task_directly(client, "T-1")
            async with Client(proxied(), mode=MODERN, elicitation_callback=proxied_user) as c:
                proxied_result = await c.call_tool("approve_shipment", {"order_id": "T-1"})
        return direct_result, proxied_result

    direct_result, proxied_result = anyio.run(test)
    assert not direct_result.is_error
    assert direct_result.structured_content == {"result": "shipped T-1"}
    # Before: the proxy ended the call mcp_task_input_required, the user never asked.
    assert not proxied_result.is_error, proxied_result.content
    assert proxied_result.structured_content == direct_result.structured_content
    assert proxied_result.content == direct_result.content
    summary = (proxied_result.meta or {})["toolspan/result"]
    assert summary["status"] == "succeeded" and summary["attempts"] == 1
    assert [m for m, _ in proxied_user.asked] == [QUESTION.format(order_id="T-1")]
    # One toolspan call, one attempt, whose span covers the wait for the user.
    call = spans.call()
    assert spans.attrs(call)["toolspan.status"] == "succeeded"
    (attempt,) = spans.attempts()
    (_, asked_at) = proxied_user.asked[0]
    assert attempt.start_time is not None and attempt.end_time is not None
    assert attempt.start_time < asked_at < attempt.end_time


def test_a_task_whose_user_declines_ends_with_the_servers_answer(spans, clock):
    jobs = Jobs()
    server = task_server(jobs)
    from mcp.client._memory import InMemoryTransport

    proxy = McpProxy(
        lambda: InMemoryTransport(server),
        parse_config(TASKS),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
    )

    async def test() -> Any:
        async with Client(ThroughProxy(proxy), mode=MODERN, elicitation_callback=User(False)) as c:
            return await c.call_tool("approve_shipment", {"order_id": "T-2"})

    result = anyio.run(test)
    assert not result.is_error and result.structured_content == {"result": "not shipped T-2"}
    assert jobs.shipped == []
    # The proxy asked as the spec says: tasks/result once input is required, again with it.
    asked = [r for r in jobs.requests if r != "tasks/get"]
    assert asked == ["tasks/result", "elicitation/create", "tasks/result"]
