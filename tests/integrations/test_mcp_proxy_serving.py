"""The proxy as a long-lived server: guard defaults for polling clients, several HTTP
clients at once, Host/Origin checks, input a server asks for mid-call (real `mcp` SDK)."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import Context, MCPServer

from toolspan.tracer.integrations.mcp_proxy import McpProxy, http_app, parse_config

from .mcp_proxy_server import Shop
from .test_mcp import asking_server
from .test_mcp_proxy import (
    DECLARED,
    MODES,
    ThroughProxy,
    make_proxy,
    payload,
    uvicorn_serving,
)

POLLS = 50


@pytest.fixture
def shop() -> Shop:
    return Shop()


async def _statuses(client: Client, name: str, arguments: dict[str, Any], times: int) -> list[str]:
    statuses = []
    for _ in range(times):
        result = await client.call_tool(name, arguments)
        statuses.append(payload(result)["status"])
    return statuses


# -- guard defaults: reads exempt, writes guarded ----------------------------------------


@pytest.mark.parametrize(
    ("config", "tool"),
    [
        (DECLARED, "get_order"),  # declared a read in the config
        ({}, "get_refund_status"),  # no config: the server's readOnlyHint (untrusted)
    ],
    ids=["declared", "annotated"],
)
def test_a_client_polling_a_read_gets_every_answer(shop, spans, clock, config, tool):
    shop.flaky_reads = 0

    async def test():
        async with Client(ThroughProxy(make_proxy(shop, spans, clock, config))) as client:
            return await _statuses(client, tool, {"order_id": "A-1"}, POLLS)

    # Before: the 4th identical answer was loop_blocked, the 6th call turn_budget.
    assert anyio.run(test) == ["succeeded"] * POLLS
    assert shop.calls[tool] == POLLS


def test_a_repeated_write_is_still_blocked_at_the_loop_threshold(shop, spans, clock):
    async def test():
        async with Client(ThroughProxy(make_proxy(shop, spans, clock, {}))) as client:
            return await _statuses(client, "ship_order", {"order_id": "A-2"}, 4)

    # An undeclared, unannotated tool is a write: three same answers, then refused.
    assert anyio.run(test) == ["succeeded"] * 3 + ["loop_blocked"]
    assert shop.shipments == ["A-2"] * 3


def test_guard_reads_puts_reads_back_under_the_guards(shop, spans, clock):
    shop.flaky_reads = 0
    config = {**DECLARED, "guard_reads": True}

    async def test():
        async with Client(ThroughProxy(make_proxy(shop, spans, clock, config))) as client:
            return await _statuses(client, "get_order", {"order_id": "A-3"}, 4)

    assert anyio.run(test) == ["succeeded"] * 3 + ["loop_blocked"]
    assert parse_config({"guard_reads": True}).guard_reads
    assert not parse_config({}).guard_reads


# -- streamable HTTP: several clients at once, Host/Origin ----------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_several_http_clients_at_once_each_complete_their_calls(shop, spans, clock, mode):
    shop.flaky_reads = 0
    proxy = make_proxy(shop, spans, clock)

    async def one_client(url: str, order_id: str, results: dict[str, Any]) -> None:
        async with Client(url, mode=mode) as client:
            listed = await client.list_tools()
            results[order_id] = (
                listed,
                await client.call_tool("get_order", {"order_id": order_id}),
            )

    async def test() -> dict[str, Any]:
        results: dict[str, Any] = {}
        async with uvicorn_serving(http_app(proxy)) as url:
            async with anyio.create_task_group() as group:
                for order_id in ("B-1", "B-2", "B-3"):
                    group.start_soon(one_client, url, order_id, results)
        return results

    results = anyio.run(test)
    assert sorted(results) == ["B-1", "B-2", "B-3"]
    for order_id, (listed, order) in results.items():
        assert "get_order" in {t.name for t in listed.tools}
        assert not order.is_error and payload(order)["status"] == "succeeded"
    assert shop.calls["get_order"] == 3


def test_each_http_client_gets_a_session_and_a_conversation_of_its_own(shop, spans, clock):
    proxy = make_proxy(shop, spans, clock, {})

    async def ship_three_times(url: str) -> list[str]:
        async with Client(url, mode="legacy") as client:
            return await _statuses(client, "ship_order", {"order_id": "C-1"}, 3)

    async def test() -> tuple[list[str], list[str]]:
        async with uvicorn_serving(http_app(proxy)) as url:
            return await ship_three_times(url), await ship_three_times(url)

    first, second = anyio.run(test)
    # Before: one conversation for every client, so the second's first call was a loop.
    assert first == second == ["succeeded"] * 3
    conversations = {spans.attrs(c)["gen_ai.conversation.id"] for c in spans.calls()}
    assert len(conversations) == 2 and all(c.startswith("mcp-session-") for c in conversations)


def test_the_upstream_is_initialized_once_for_all_http_clients(shop, spans, clock):
    proxy = make_proxy(shop, spans, clock)
    initializes: list[str] = []
    handle = proxy._upstream.send

    async def counting(message: Any) -> None:
        if getattr(message, "method", None) == "initialize":
            initializes.append(str(message.id))
        await handle(message)

    proxy._upstream.send = counting  # type: ignore[method-assign]

    async def one_client(url: str) -> Any:
        async with Client(url, mode="legacy") as client:
            await client.call_tool("get_refund_status", {"order_id": "C-2"})
            return client.server_info

    async def test() -> list[Any]:
        results: list[Any] = []
        async with uvicorn_serving(http_app(proxy)) as url:

            async def run() -> None:
                results.append(await one_client(url))

            async with anyio.create_task_group() as group:
                for _ in range(3):
                    group.start_soon(run)
        return results

    results = anyio.run(test)
    assert len(results) == 3 and {r.name for r in results} == {"shop"}
    assert len(initializes) == 1  # a stateful server may refuse a second initialize


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Host": "evil.example"}, 403),
        ({"Host": "evil.example:8100"}, 403),
        ({"Origin": "http://evil.example"}, 403),
        ({"Origin": "null"}, 403),
        ({"Host": "localhost:8100", "Origin": "http://localhost:3000"}, 200),
        ({"Host": "[::1]:8100"}, 200),
        ({"Host": "proxy.internal:8100"}, 200),  # allowed below
        ({"Origin": "https://app.example"}, 200),  # allowed below
    ],
)
def test_a_host_or_origin_not_allowed_gets_403(shop, spans, clock, headers, status):
    proxy = make_proxy(shop, spans, clock)
    app = http_app(
        proxy, allowed_hosts=["proxy.internal:8100"], allowed_origins=["https://app.example"]
    )
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}

    async def test() -> httpx2.Response:
        async with uvicorn_serving(app) as url, httpx2.AsyncClient() as http:
            return await http.post(url, json=ping, headers=headers)

    response = anyio.run(test)
    assert response.status_code == status, response.text
    if status == 403:
        assert "DNS rebinding" in response.text


# -- input the upstream asks for mid-call (2026-07-28 multi-round-trip) ------------------------


@pytest.mark.parametrize("serving", ["stdio", "http"])
def test_input_the_upstream_asks_for_mid_call_is_relayed_to_the_client_and_back(
    spans, clock, serving
):
    seen: list[Any] = []
    asked: list[str] = []
    answered_ns: list[int] = []

    async def on_elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        answered_ns.append(time.time_ns())
        return mcp_types.ElicitResult(action="accept", content={"ok": True})

    proxy = McpProxy(
        lambda: InMemoryTransport(asking_server(seen)),
        parse_config({"timeout_s": 5}),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
    )

    async def call(transport: Any) -> Any:
        async with Client(transport, mode="2026-07-28", elicitation_callback=on_elicit) as c:
            return await c.call_tool("approve_refund", {"order_id": "D-1"})

    async def test() -> Any:
        if serving == "stdio":  # a stream pair, as stdio serves it
            return await call(ThroughProxy(proxy))
        async with uvicorn_serving(http_app(proxy)) as url:  # each leg its own POST
            return await call(url)

    result = anyio.run(test)
    # Before: the call ended mcp_input_required; now it completes as it does directly.
    assert not result.is_error, result
    assert payload(result)["status"] == "succeeded" and payload(result)["attempts"] == 1
    assert asked == ["Refund D-1?"]
    # The upstream got its own requestState back (not the proxy's) and the answer.
    assert seen[0] == (None, None)
    assert seen[1][0] == "asked:D-1" and seen[1][1].content == {"ok": True}
    # One call, one attempt: its span covers the wait for the client's answer.
    (attempt,) = spans.attempts()
    assert attempt.start_time < answered_ns[0] < attempt.end_time


# -- progress of an abandoned attempt ---------------------------------------------------------


def test_progress_of_an_abandoned_attempt_is_not_forwarded(spans, clock):
    import json

    from .test_mcp_proxy import Recording

    server = MCPServer("slow-then-fast")
    release, late_sent = anyio.Event(), anyio.Event()
    attempts: list[int] = []

    @server.tool()
    async def poll(ctx: Context) -> str:
        attempts.append(1)
        if len(attempts) > 1:
            await ctx.report_progress(1, 1, "second attempt")
            return "fresh"
        await ctx.report_progress(1, 2, "first attempt")
        with anyio.CancelScope(shield=True):  # a server that goes on after a cancel
            await release.wait()
            await ctx.report_progress(2, 2, "abandoned attempt")
            late_sent.set()
        return "late"

    proxy = McpProxy(
        lambda: InMemoryTransport(server),
        parse_config({"timeout_s": 0.2, "tools": {"poll": {"side_effect": "read"}}}),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
    )
    recording = Recording(ThroughProxy(proxy))

    async def test() -> Any:
        async with Client(recording, mode="legacy") as client:
            result = await client.call_tool("poll", {}, progress_callback=_ignore)
            release.set()
            with anyio.fail_after(5):
                await late_sent.wait()
            await client.list_tools()  # after the late progress on the one upstream stream
            return result

    result = anyio.run(test)
    assert payload(result)["attempts"] == 2
    messages = [json.loads(text) for text in recording.received]
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    # Before: the abandoned attempt's progress reached the client after the answer.
    assert [p["message"] for p in progress] == ["first attempt", "second attempt"]
    (call,) = [m for m in recording.sent if getattr(m, "method", None) == "tools/call"]
    token = call.params["_meta"]["progressToken"]
    assert {p["progressToken"] for p in progress} == {token}  # the client's own token


async def _ignore(done: float, total: float | None, message: str | None) -> None:
    """A progress callback (the client asks for progress)."""


# -- URL elicitation (-32042) -------------------------------------------------------------------


def test_a_url_elicitation_error_reaches_the_client_as_the_same_jsonrpc_error(spans, clock):
    from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError

    server = MCPServer("needs-a-login")

    @server.tool()
    async def list_files(ctx: Context) -> str:
        url = mcp_types.ElicitRequestURLParams(
            message="Sign in to your files", url="https://example.com/login", elicitation_id="e-1"
        )
        raise UrlElicitationRequiredError([url])

    async def error_of(transport: Any) -> MCPError:
        async with Client(transport, mode="legacy") as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("list_files", {})
        return raised.value

    proxy = McpProxy(
        lambda: InMemoryTransport(server),
        parse_config({"timeout_s": 5}),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
    )

    async def test() -> tuple[MCPError, MCPError]:
        return await error_of(InMemoryTransport(server)), await error_of(ThroughProxy(proxy))

    direct, proxied = anyio.run(test)
    # Before: an isError result whose text doubled the message ("MCP error -32042: ...").
    assert proxied.code == direct.code == mcp_types.URL_ELICITATION_REQUIRED
    assert proxied.message == direct.message and proxied.data == direct.data
    assert spans.call() is not None  # still one toolspan call, classified
    assert spans.attrs(spans.call())["toolspan.error_code"] == "jsonrpc_-32042"


# -- a client's task ----------------------------------------------


def test_a_clients_task_is_forwarded_upstream_and_awaited(spans, clock):
    from .mcp_proxy_server import ShopTasks

    shop = Shop()
    shop.lost_task_results = 0
    asked: list[Any] = []

    class RecordingTasks(ShopTasks):
        async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
            asked.append(params.task)
            return await super().intercept_tool_call(params, ctx, call_next)

    server = MCPServer("tasks", extensions=[RecordingTasks(shop)])

    @server.tool()
    async def ship(order_id: str, ctx: Context) -> str:
        shop.shipments.append(order_id)
        return f"shipped {order_id}"

    proxy = McpProxy(
        lambda: InMemoryTransport(server),
        parse_config({"timeout_s": 5}),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
    )
    params = mcp_types.CallToolRequestParams(
        name="ship", arguments={"order_id": "E-1"}, task=mcp_types.TaskMetadata(ttl=12_345)
    )

    async def test() -> Any:
        # The tasks extension of 2026-07-28 (its listing has no execution.taskSupport).
        async with Client(ThroughProxy(proxy), mode="2026-07-28") as client:
            request = mcp_types.CallToolRequest(params=params)
            return await client.session.send_request(request, mcp_types.CallToolResult)

    result = anyio.run(test)
    # Before: the proxy dropped the client's task; the upstream got none.
    assert [a.ttl if a is not None else None for a in asked] == [12_345]
    assert not result.is_error and payload(result)["status"] == "succeeded"
    assert shop.shipments == ["E-1"] and "tasks/result" in shop.task_requests


def test_the_cli_allows_the_bound_host_and_the_named_ones():
    import argparse

    from toolspan.tracer.integrations.mcp_proxy._cli import _allowed_hosts, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(
        ["mcp", "proxy", "--serve", "http", "--allow-host", "a.internal", "--allow-host",
         "b.internal:8100", "--allow-origin", "https://app.example", "--upstream", "http://x/mcp"]
    )  # fmt: skip
    assert args.allow_origin == ["https://app.example"]
    assert _allowed_hosts("10.0.0.5", args.allow_host) == [
        "a.internal", "b.internal:8100", "10.0.0.5"
    ]  # fmt: skip
    assert _allowed_hosts("::1", []) == ["[::1]"]
    assert _allowed_hosts("0.0.0.0", ["a.internal"]) == ["a.internal"]  # a wildcard: none more
