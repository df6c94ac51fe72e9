"""Issue 41 with the real `mcp` SDK on both sides: what the server sends while no call
runs (a resource updated) reaches HTTP clients through `--serve http`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import ResourceUpdated

from toolspan.tracer.integrations.mcp_proxy import McpProxy, http_app, http_upstream, parse_config
from toolspan.tracer.integrations.mcp_proxy._memory import ThroughProxy
from toolspan.tracer.integrations.mcp_proxy._subscriptions import Subscriptions

from .mcp_task_server import STOCK_URI, Jobs, task_server
from .test_mcp_proxy import uvicorn_serving

WAIT_S = 10.0  # a bound on a notification that is on its way (never reached when it works)
LISTEN_TIMEOUT_S = 0.3  # the proxy's timeout_s: a listen stream outlives it


class Inbox:
    """A client's message handler: the server notifications it got."""

    def __init__(self) -> None:
        self.got: list[mcp_types.ServerNotification] = []
        self.updated = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            return
        self.got.append(message)
        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            self.updated.set()

    def updates(self) -> list[str]:
        return [
            m.params.uri for m in self.got if isinstance(m, mcp_types.ResourceUpdatedNotification)
        ]


@asynccontextmanager
async def proxy_of(
    jobs: Jobs, spans: Any, upstream: str, timeout_s: float = 5
) -> AsyncIterator[str]:
    """The proxy on HTTP, in front of the task server in memory or on HTTP; its URL."""
    server = task_server(jobs)
    async with AsyncExitStack() as stack:
        connect: Any = lambda: InMemoryTransport(server)  # noqa: E731
        if upstream == "http":
            served = uvicorn_serving(server.streamable_http_app())
            connect = http_upstream(await stack.enter_async_context(served))
        proxy = McpProxy(
            connect,
            parse_config({"timeout_s": timeout_s}),
            http_upstream=upstream == "http",
            tracer_provider=spans.provider,
        )
        yield await stack.enter_async_context(uvicorn_serving(http_app(proxy)))


async def _subscribed_client_sees_the_update(url: str, jobs: Jobs) -> tuple[Inbox, Inbox]:
    """A client subscribes to the stock; another subscribes and unsubscribes; then the
    stock changes. Both sessions end (the SDK client's ``DELETE``) before the return."""
    inbox, bystander = Inbox(), Inbox()
    jobs.unsubscribed = asyncio.Event()
    async with Client(url, mode="legacy", message_handler=inbox) as client:
        async with Client(url, mode="legacy", message_handler=bystander) as other:
            with pytest.warns(MCPDeprecationWarning):
                await client.subscribe_resource(STOCK_URI)
                await other.subscribe_resource(STOCK_URI)
                await other.unsubscribe_resource(STOCK_URI)
            # One subscribe went upstream; the other's unsubscribe did not (shared session).
            assert [r for r in jobs.requests if r.startswith("resources/")] == [
                f"resources/subscribe {STOCK_URI}"
            ]
            await client.call_tool("touch_stock", {})  # answered: no call runs now
            assert jobs.touch is not None
            jobs.touch.set()
            with anyio.fail_after(WAIT_S):
                await inbox.updated.wait()
            with pytest.warns(MCPDeprecationWarning):  # legacy mode: still served
                await other.send_ping()  # its stream had the time to get it
    # The last subscribed session ended: the upstream is unsubscribed.
    with anyio.fail_after(WAIT_S):
        await jobs.unsubscribed.wait()
    return inbox, bystander


@pytest.mark.slow
@pytest.mark.parametrize("upstream", ["memory", "http"])
def test_a_subscribed_http_client_gets_an_update_sent_outside_any_call(spans, upstream):
    jobs = Jobs()

    async def test() -> Any:
        jobs.touch = asyncio.Event()
        async with proxy_of(jobs, spans, upstream) as url:
            return await _subscribed_client_sees_the_update(url, jobs)

    # Before: GET was 405; the update had nowhere to go and the wait timed out. Then:
    # the other client's unsubscribe went upstream, whose one session was unsubscribed
    # for both, and the wait timed out again.
    inbox, bystander = anyio.run(test)
    assert inbox.updates() == [STOCK_URI]
    # A client no longer subscribed to the resource is not told of it.
    assert bystander.updates() == []
    assert jobs.requests[-1] == f"resources/unsubscribe {STOCK_URI}"


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "evil.example"}, 403),
        ({"origin": "https://evil.example"}, 403),
        ({}, 400),  # no session
        ({"accept": "application/json", "mcp-session-id": "s"}, 406),
        ({"mcp-session-id": "s", "last-event-id": "http-9-1"}, 400),
    ],
    ids=["host", "origin", "no-session", "not-sse", "unknown-event-id"],
)
def test_the_standalone_get_keeps_the_dns_rebinding_checks(spans, headers, status):
    jobs = Jobs()

    async def test() -> int:
        async with proxy_of(jobs, spans, "memory") as url:
            sent = {"accept": "text/event-stream", **headers}
            async with httpx2.AsyncClient() as http:
                return (await http.get(url, headers=sent)).status_code

    assert anyio.run(test) == status


# -- 2026-07-28: subscriptions/listen ------------------------------------------------------


async def _listener_sees_the_update(client: Client, jobs: Jobs, outlive_s: float) -> Any:
    async with client.listen(resource_subscriptions=[STOCK_URI]) as subscription:
        await client.call_tool("touch_stock", {})  # answered: no call runs now
        await anyio.sleep(outlive_s)  # longer than the proxy's timeout_s
        assert jobs.touch is not None
        jobs.touch.set()
        with anyio.fail_after(WAIT_S):
            return await subscription.__anext__()


@pytest.mark.slow
@pytest.mark.parametrize("upstream", ["memory", "http"])
def test_a_listening_http_client_gets_an_update_sent_outside_any_call(spans, upstream):
    jobs = Jobs()

    async def test() -> Any:
        jobs.touch = asyncio.Event()
        async with proxy_of(jobs, spans, upstream, timeout_s=LISTEN_TIMEOUT_S) as url:
            async with Client(url, mode="2026-07-28") as client:
                return await _listener_sees_the_update(client, jobs, 2 * LISTEN_TIMEOUT_S)

    # Before: the listen's stream got no frame with its id, then a timeout error.
    assert anyio.run(test) == ResourceUpdated(uri=STOCK_URI)


def test_a_listen_through_the_stdio_serving_outlives_the_proxys_timeout(spans):
    jobs = Jobs()
    server = task_server(jobs)
    proxy = McpProxy(
        lambda: InMemoryTransport(server),
        parse_config({"timeout_s": LISTEN_TIMEOUT_S}),
        tracer_provider=spans.provider,
    )

    async def test() -> Any:
        jobs.touch = asyncio.Event()
        async with Client(ThroughProxy(proxy), mode="2026-07-28") as client:
            return await _listener_sees_the_update(client, jobs, 2 * LISTEN_TIMEOUT_S)

    # Before: the relayed listen was answered with a timeout error after timeout_s.
    assert anyio.run(test) == ResourceUpdated(uri=STOCK_URI)


# -- the per-session subscription book -------------------------------------------------------


def _request(method: str, number: int) -> mcp_types.JSONRPCRequest:
    return mcp_types.JSONRPCRequest(
        jsonrpc="2.0", id=f"http-{number}", method=method, params={"uri": STOCK_URI}
    )


@pytest.mark.parametrize("upstream_fails", [False, True], ids=["subscribed", "refused"])
def test_a_subscribe_racing_the_first_of_its_uri_gets_the_upstreams_answer(upstream_fails):
    """The upstream answers the first subscribe late; another session's, meanwhile,
    is not sent again and gets that answer (an error too: nobody is subscribed)."""
    book = Subscriptions()
    relayed: list[tuple[mcp_types.JSONRPCRequest, Any]] = []
    answers: dict[str, mcp_types.JSONRPCMessage] = {}

    async def relay(request: mcp_types.JSONRPCRequest, reply: Any) -> None:
        relayed.append((request, reply))

    def reply_to(session: str) -> Any:
        async def reply(message: mcp_types.JSONRPCMessage) -> None:
            answers[session] = message

        return reply

    async def test() -> None:
        await book.request("a", _request("resources/subscribe", 1), reply_to("a"), relay)
        async with anyio.create_task_group() as group:
            group.start_soon(
                book.request, "b", _request("resources/subscribe", 2), reply_to("b"), relay
            )
            await anyio.wait_all_tasks_blocked()
            assert "b" not in answers  # it waits for the upstream's answer to the first
            first, reply = relayed[0]
            if upstream_fails:
                error = mcp_types.ErrorData(code=-32602, message="no such resource")
                await reply(mcp_types.JSONRPCError(jsonrpc="2.0", id=first.id, error=error))
            else:
                await reply(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=first.id, result={}))

    anyio.run(test)
    assert [r.method for r, _ in relayed] == ["resources/subscribe"]  # sent up once
    kinds = {s: type(m).__name__ for s, m in answers.items()}
    if upstream_fails:
        assert kinds == {"a": "JSONRPCError", "b": "JSONRPCError"}
        assert book.sessions(STOCK_URI) == frozenset()
    else:
        assert kinds == {"a": "JSONRPCResponse", "b": "JSONRPCResponse"}
        assert answers["b"].id == "http-2"
        assert book.sessions(STOCK_URI) == {"a", "b"}
        assert book.end("a") == []  # b still holds it: no unsubscribe upstream
        assert book.end("b") == [STOCK_URI]
