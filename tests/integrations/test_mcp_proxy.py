"""`toolspan mcp proxy` with the real `mcp` SDK on both sides (in memory, JSON-RPC framing)."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._context_streams import create_context_streams
from opentelemetry.trace import SpanKind

from toolspan.tracer import DEFAULT_COMMIT_WINDOW_S
from toolspan.tracer.integrations.mcp import IDEMPOTENCY_META_KEY
from toolspan.tracer.integrations.mcp_proxy import (
    CONVERSATION_META_KEY,
    McpProxy,
    http_app,
    http_upstream,
    parse_config,
)
from toolspan.tracer.integrations.mcp_proxy._memory import StreamsTransport, ThroughProxy
from toolspan.tracer.store import MemoryStore, derive_key

from ..services import free_port
from .mcp_proxy_server import Shop, shop_server

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 0.2  # the proxy's per-call timeout: a late answer is really late
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"
MODES = ["legacy", "2026-07-28"]  # the handshake era and the stateless protocol

DECLARED = {
    "timeout_s": TIMEOUT_S,
    "error_code_field": "error_code",
    "retry_after_field": "retry_after",
    "tools": {
        "get_order": {"side_effect": "read"},
        "get_refund_status": {"side_effect": "read"},
        # The scripted shop never acts on a call after it answered or timed out.
        "refund_order": {
            "side_effect": "write",
            "check_with": "get_refund_status",
            "commit_window_s": 0,
        },
    },
}
# The same with the default commit window: an upstream that may still commit late.
WINDOWED = {
    **DECLARED,
    "tools": {
        **DECLARED["tools"],
        "refund_order": {"side_effect": "write", "check_with": "get_refund_status"},
    },
}


class Recording(StreamsTransport):
    """A transport wrapper that keeps every JSON-RPC message as its wire text, both ways."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.received: list[str] = []
        self.sent: list[Any] = []

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Any]:
        async with self.inner as (read, write):
            to_client, client_read = create_context_streams[Any](16)
            client_write, from_client = create_context_streams[Any](16)

            async def inbound() -> None:
                async with to_client:
                    async for item in read:
                        self.received.append(_wire(item.message))
                        await to_client.send(item)

            async def outbound() -> None:
                async for item in from_client:
                    self.sent.append(item.message)
                    await write.send(item)

            async with anyio.create_task_group() as group:
                group.start_soon(inbound)
                group.start_soon(outbound)
                yield client_read, client_write
                group.cancel_scope.cancel()

    def relayed(self) -> list[str]:
        """What the client received, but the answers to its tools/call requests."""
        calls = {m.id for m in self.sent if getattr(m, "method", None) == "tools/call"}
        return [text for text in self.received if json.loads(text).get("id") not in calls]


def _wire(message: Any) -> str:
    return message.model_dump_json(by_alias=True, exclude_unset=True)  # as stdio writes it


def make_proxy(
    shop: Shop, spans, clock, config: dict[str, Any] | None = None, **options
) -> McpProxy:
    server = shop_server(shop)
    return McpProxy(
        lambda: InMemoryTransport(server),
        parse_config(DECLARED if config is None else config),
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
        rng=random.Random(0),
        conversation_id="run-1",
        **options,
    )


def payload(result: mcp_types.CallToolResult) -> dict[str, Any]:
    """toolspan's structured result (in ``_meta`` where the tool's outputSchema binds the data)."""
    summary = (result.meta or {}).get("toolspan/result")
    if summary is not None:
        return dict(summary)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def server_spans(spans, method: str) -> list[Any]:
    return [
        s
        for s in spans.all()
        if s.kind == SpanKind.SERVER and spans.attrs(s).get("mcp.method.name") == method
    ]


@pytest.fixture
def shop() -> Shop:
    return Shop()


@pytest.mark.parametrize("mode", MODES)
def test_a_flaky_read_is_retried_after_the_servers_retry_after(shop, spans, clock, mode):
    async def test():
        wire = Recording(ThroughProxy(make_proxy(shop, spans, clock)))
        async with Client(wire, mode=mode) as client:
            result = await client.call_tool(
                "get_order", {"order_id": "A-1"}, meta={"traceparent": TRACEPARENT}
            )
        (call,) = [m for m in wire.sent if getattr(m, "method", None) == "tools/call"]
        return result, call.params["_meta"]["traceparent"]

    # The client's trace context as it went on the wire (the SDK's own client span
    # replaces ours when a global tracer provider is set).
    result, traceparent = anyio.run(test)
    _, trace_id, parent_id, _ = traceparent.split("-")
    assert not result.is_error
    body = payload(result)
    assert (body["status"], body["attempts"]) == ("succeeded", 2)
    # The upstream's answer as it sent it; toolspan's status beside it in _meta.
    assert "data" not in body
    assert result.structured_content == {"order_id": "A-1", "status": "shipped"}
    assert clock.slept == [2.0]  # the server's Retry-After, not the backoff
    assert shop.calls["get_order"] == 2
    # One SERVER span per the MCP conventions, continuing the client's trace ...
    (server,) = server_spans(spans, "tools/call")
    attrs = spans.attrs(server)
    assert server.name == "tools/call get_order"
    assert format(server.context.trace_id, "032x") == trace_id
    assert format(server.parent.span_id, "016x") == parent_id
    assert attrs["gen_ai.tool.name"] == "get_order" and "error.type" not in attrs
    assert attrs["jsonrpc.request.id"]
    if mode != "legacy":
        assert attrs["mcp.protocol.version"] == mode
    else:
        assert attrs["mcp.protocol.version"]  # the version the handshake settled on
    # ... toolspan's call span under it, and the trace context sent upstream per attempt.
    call = spans.call()
    assert call.parent.span_id == server.context.span_id
    assert spans.attrs(call)["gen_ai.conversation.id"] == "run-1"  # the proxy's own run
    attempts = spans.attempts()
    assert [spans.attrs(a)["toolspan.attempt.outcome"] for a in attempts] == ["http_503", "ok"]
    sent = [m["traceparent"] for m in shop.metas]
    assert [t.split("-")[1] for t in sent] == [trace_id, trace_id]
    assert [t.split("-")[2] for t in sent] == [format(a.context.span_id, "016x") for a in attempts]


@pytest.mark.parametrize("mode", MODES)
def test_a_timed_out_write_is_not_repeated_and_its_repeat_waits_for_the_check(
    shop, spans, clock, mode
):
    args = {"order_id": "A-2"}

    async def test():
        # The guards' store reads the same clock, so the window can pass.
        proxy = make_proxy(shop, spans, clock, WINDOWED, store=MemoryStore(clock=clock))
        async with Client(ThroughProxy(proxy), mode=mode) as client:
            lost = await client.call_tool("refund_order", args)
            # The client retries itself while the upstream may still commit the first call.
            held = await client.call_tool("refund_order", args)
            clock.advance(DEFAULT_COMMIT_WINDOW_S)
            repeated = await client.call_tool("refund_order", args)  # after the window
            checked = await client.call_tool("get_refund_status", args)
            after_check = await client.call_tool("refund_order", args)
            return lost, held, repeated, checked, after_check

    lost, held, repeated, checked, after_check = anyio.run(test)
    assert lost.is_error and payload(lost)["status"] == "unsafe_retry"
    assert payload(lost)["error_code"] == "unknown_outcome" and payload(lost)["attempts"] == 1
    assert payload(lost)["next"]["tools"] == ["get_refund_status"]
    assert held.is_error and payload(held)["status"] == "in_progress"
    assert payload(held)["attempts"] == 0  # nothing ran upstream
    assert repeated.is_error and payload(repeated)["status"] == "read_back_required"
    assert "get_refund_status" in repeated.content[0].text  # the text says it too
    assert checked.structured_content == {"result": "refunded"}  # its outputSchema holds
    assert checked.meta["toolspan/result"]["status"] == "succeeded"
    # The check answered: running the write again is the client's informed choice.
    assert not after_check.is_error
    assert shop.refunds == ["A-2", "A-2"]
    errors = [spans.attrs(s).get("error.type") for s in server_spans(spans, "tools/call")]
    assert errors == ["tool_error", "tool_error", "tool_error", None, None]


def test_an_undeclared_tool_is_a_write_and_annotations_count_only_when_trusted(shop, spans, clock):
    shop.flaky_reads = 1

    async def call(config):
        async with Client(ThroughProxy(make_proxy(shop, spans, clock, config))) as client:
            return await client.call_tool("get_order", {"order_id": "A-3"})

    untrusted = anyio.run(call, {"timeout_s": TIMEOUT_S, "error_code_field": "error_code"})
    shop.calls.clear()
    trusted = anyio.run(
        call,
        {"timeout_s": TIMEOUT_S, "error_code_field": "error_code", "trust_annotations": True},
    )
    # Undeclared: a write, so a 503 is not retried (the server's readOnlyHint is a hint).
    assert untrusted.is_error and payload(untrusted)["attempts"] == 1
    assert not trusted.is_error and payload(trusted)["attempts"] == 2


def test_an_idempotent_write_gets_a_key_from_its_arguments_and_the_conversation(shop, spans, clock):
    config = {
        "timeout_s": TIMEOUT_S,
        "tools": {
            "refund_order": {
                "side_effect": "write",
                "idempotent": True,
                "key_arguments": ["order_id"],
                "resource_key": "order_id",
            }
        },
    }
    meta = {CONVERSATION_META_KEY: "conv-9"}

    async def test():
        async with Client(ThroughProxy(make_proxy(shop, spans, clock, config))) as client:
            return await client.call_tool("refund_order", {"order_id": "A-4"}, meta=meta)

    result = anyio.run(test)
    # The lost answer is retried under the same key, which the server can deduplicate.
    assert (payload(result)["status"], payload(result)["attempts"]) == ("succeeded", 2)
    key = derive_key("conv-9", 'refund_order:{"order_id":"A-4"}')
    assert [m[IDEMPOTENCY_META_KEY] for m in shop.metas] == [key, key]
    assert spans.attrs(spans.call())["gen_ai.conversation.id"] == "conv-9"


@pytest.mark.filterwarnings("ignore:ping is removed")  # the handshake era still has it
@pytest.mark.parametrize("mode", MODES)
def test_everything_but_tools_call_passes_through_byte_for_byte(shop, spans, clock, mode):
    async def session(client: Client) -> list[tuple[float, str | None]]:
        progress: list[tuple[float, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, message))

        await client.call_tool("count_down", {"steps": 3}, progress_callback=on_progress)
        await client.list_tools()
        await client.list_prompts()
        await client.get_prompt("greeting", {"name": "Ada"})
        await client.list_resources()
        await client.read_resource("shop://policy")
        if mode == "legacy":
            await client.send_ping()  # the 2026-07-28 protocol has no ping
        return progress

    async def test():
        direct = Recording(InMemoryTransport(shop_server(shop)))
        async with Client(direct, mode=mode) as client:
            direct_progress = await session(client)
        proxied = Recording(ThroughProxy(make_proxy(shop, spans, clock)))
        async with Client(proxied, mode=mode) as client:
            proxied_progress = await session(client)
        return direct, proxied, direct_progress, proxied_progress

    direct, proxied, direct_progress, proxied_progress = anyio.run(test)
    assert len(direct.relayed()) >= 8  # the handshake or discovery, lists, reads, progress
    assert proxied.relayed() == direct.relayed()
    assert proxied_progress == direct_progress == [(1, "step 1"), (2, "step 2"), (3, "step 3")]
    methods = {spans.attrs(s)["mcp.method.name"] for s in spans.all() if s.kind == SpanKind.SERVER}
    assert {"tools/list", "prompts/get", "resources/read"} <= methods


def test_a_hanging_upstream_gets_a_clear_error_and_the_proxy_keeps_serving(shop, spans, clock):
    async def test():
        async with Client(ThroughProxy(make_proxy(shop, spans, clock))) as client:
            hung = await client.call_tool("hang", {})
            order = await client.call_tool("get_order", {"order_id": "A-5"})
            return hung, order

    hung, order = anyio.run(test)
    assert hung.is_error and payload(hung)["status"] == "unsafe_retry"
    assert "did not answer within 0.2s" in payload(hung)["message"]
    assert not order.is_error


# -- streamable HTTP on both sides ------------------------------------------------------


@asynccontextmanager
async def uvicorn_serving(app: Any) -> AsyncIterator[str]:
    """``app`` on a free local port in this event loop; yields its MCP URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp"
        server.should_exit = True


@pytest.mark.parametrize("mode", MODES)
def test_over_streamable_http_on_both_sides(shop, spans, clock, mode):
    upstream_app = shop_server(shop).streamable_http_app(json_response=True)

    async def test():
        async with uvicorn_serving(upstream_app) as upstream_url:
            proxy = McpProxy(
                http_upstream(upstream_url),
                parse_config({**DECLARED, "conversation_header": "x-conversation-id"}),
                http_upstream=True,
                tracer_provider=spans.provider,
                sleep=clock.async_sleep,
                clock=clock,
                rng=random.Random(0),
            )
            async with uvicorn_serving(http_app(proxy)) as proxy_url:
                http = httpx2.AsyncClient(headers={"x-conversation-id": "conv-http"})
                transport = streamable_http_client(proxy_url, http_client=http)
                async with http, Client(transport, mode=mode) as client:
                    listed = await client.list_tools()
                    order = await client.call_tool("get_order", {"order_id": "A-6"})
                    lost = await client.call_tool("refund_order", {"order_id": "A-6"})
                    repeated = await client.call_tool("refund_order", {"order_id": "A-6"})
        return listed, order, lost, repeated

    listed, order, lost, repeated = anyio.run(test)
    assert "refund_order" in {t.name for t in listed.tools}
    assert payload(order)["attempts"] == 2 and clock.slept == [2.0]
    assert payload(lost)["status"] == "unsafe_retry"
    assert payload(repeated)["status"] == "read_back_required"
    assert shop.refunds == ["A-6"]
    # The conversation came from the configured header.
    assert {spans.attrs(c)["gen_ai.conversation.id"] for c in spans.calls()} == {"conv-http"}


# -- the command line, with the upstream as a process ---------------------------------------


def test_a_bad_config_is_one_clear_line_and_exit_2(tmp_path, capsys):
    from toolspan.cli import main

    path = tmp_path / "proxy.toml"
    path.write_text('[tools.refund_order]\nside_effect = "write"\ncheck_with = "nope"\n')
    assert main(["mcp", "proxy", "--config", str(path), "--", "python", "-m", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.endswith(
        "tools.refund_order.check_with: 'nope' must be declared as a read "
        '([tools.nope] side_effect = "read")'
    )
    path.write_text("timeout_s = -1\n")
    assert main(["mcp", "proxy", "--config", str(path), "--", "python"]) == 2
    assert "timeout_s must be a positive number" in capsys.readouterr().err
    assert main(["mcp", "proxy"]) == 2
    assert "--upstream URL" in capsys.readouterr().err


@pytest.mark.slow
def test_over_stdio_the_upstream_crashing_or_hanging_gets_a_clear_error(tmp_path):
    import sys

    from mcp import StdioServerParameters

    config = tmp_path / "proxy.toml"
    config.write_text('timeout_s = 1.5\n[tools.get_refund_status]\nside_effect = "read"\n')
    traces = tmp_path / "proxy.jsonl"
    proxy = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "toolspan.cli",
            "mcp",
            "proxy",
            "--config",
            str(config),
            "--trace-file",
            str(traces),
            "--",
            sys.executable,
            "-m",
            "tests.integrations.mcp_proxy_server",
        ],
        cwd=str(REPO),
    )

    async def test():
        async with Client(proxy, mode="legacy") as client:
            crashed = await client.call_tool("crash", {})
            hung = await client.call_tool("hang", {})
            after = await client.call_tool("get_refund_status", {"order_id": "A-7"})
            prompt = await client.get_prompt("greeting", {"name": "Ada"})
        return crashed, hung, after, prompt

    crashed, hung, after, prompt = anyio.run(test)
    assert crashed.is_error and payload(crashed)["error_code"] == "unknown_outcome"
    assert "closed the connection" in payload(crashed)["message"]
    assert hung.is_error and "did not answer within 1.5s" in payload(hung)["message"]
    # A new upstream process took over (initialized again): the proxy kept serving.
    assert not after.is_error
    assert after.structured_content == {"result": "not refunded"}
    assert "Ada" in prompt.messages[0].content.text
    assert traces.stat().st_size > 0


def test_a_client_gone_before_its_answer_leaves_the_proxy_serving(shop, spans, clock, caplog):
    from mcp.shared.message import SessionMessage

    proxy = make_proxy(shop, spans, clock)
    initialize = mcp_types.JSONRPCRequest(
        jsonrpc="2.0",
        id=1,
        method="initialize",
        params={
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "gone", "version": "1"},
        },
    )

    async def test():
        to_proxy, proxy_reads = create_context_streams[Any](1)
        proxy_writes, client_reads = create_context_streams[Any](1)
        client_reads.close()  # the client stopped reading before its answer came
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(proxy.serve, proxy_reads, proxy_writes)
                await to_proxy.send(SessionMessage(initialize))
                while "the client closed its side" not in caplog.text:
                    await anyio.sleep(0)  # the upstream answers in this event loop
                await to_proxy.aclose()  # serve returns: nothing was raised out of it

    anyio.run(test)
    assert "dropped a JSONRPCResponse: the client closed its side" in caplog.text


def _children_running(marker: bytes) -> list[int]:
    """Pids of this process's children whose command line holds ``marker`` (Linux /proc)."""
    import os

    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if ppid == os.getpid() and marker in cmdline:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_a_stdio_upstream_serves_through_its_pipes_and_is_stopped_with_the_proxy(spans):
    import sys

    from toolspan.tracer.integrations.mcp_proxy import stdio_upstream

    marker = b"tests.integrations.mcp_proxy_server"
    connect = stdio_upstream(
        sys.executable, ["-m", "tests.integrations.mcp_proxy_server"], cwd=str(REPO)
    )
    proxy = McpProxy(connect, parse_config(DECLARED), tracer_provider=spans.provider)

    async def test():
        async with Client(ThroughProxy(proxy), mode="legacy") as client:
            read = await client.call_tool("get_refund_status", {"order_id": "A-7"})
            prompt = await client.get_prompt("greeting", {"name": "Ada"})
            running = _children_running(marker)
        return read, prompt, running

    read, prompt, running = anyio.run(test)
    assert not read.is_error and read.structured_content == {"result": "not refunded"}
    assert "Ada" in prompt.messages[0].content.text
    assert len(running) == 1  # one server process while the proxy served
    assert _children_running(marker) == []  # stopped (and reaped) when the proxy stopped


# -- the tasks extension: MCP's own read-back -------------------------------------------------

TASKS = {
    "timeout_s": TIMEOUT_S,
    "tools": {"ship_order": {"side_effect": "write", "task": True}},
}


def test_a_task_whose_answer_is_lost_is_read_back_not_repeated(shop, spans, clock):
    async def test():
        async with Client(ThroughProxy(make_proxy(shop, spans, clock, TASKS)), mode=MODES[1]) as c:
            return await c.call_tool("ship_order", {"order_id": "A-8"})

    result = anyio.run(test)
    body = payload(result)
    assert not result.is_error and body["reconciled"] is True
    assert result.structured_content == {"result": "shipped A-8"}
    # One write; its lost tasks/result was asked again, the tools/call never.
    assert shop.shipments == ["A-8"] and shop.calls["ship_order"] == 1
    assert shop.task_requests == ["tasks/get", "tasks/result", "tasks/get", "tasks/result"]
    call = spans.attrs(spans.call())
    assert call["toolspan.read_back"] == "found"
    (attempt,) = spans.attempts()
    assert spans.attrs(attempt)["toolspan.attempt.outcome"] == "timeout"


def test_a_repeat_of_a_task_call_left_unknown_reads_the_task_back(shop, spans, clock):
    shop.lost_task_results = 2  # the call's own read-back loses its answer too

    async def test():
        async with Client(ThroughProxy(make_proxy(shop, spans, clock, TASKS)), mode=MODES[1]) as c:
            lost = await c.call_tool("ship_order", {"order_id": "A-9"})
            repeated = await c.call_tool("ship_order", {"order_id": "A-9"})
        return lost, repeated

    lost, repeated = anyio.run(test)
    assert lost.is_error and payload(lost)["error_code"] == "unknown_outcome"
    assert not repeated.is_error and payload(repeated)["reconciled"] is True
    assert payload(repeated)["attempts"] == 0  # answered by the read-back alone
    assert shop.shipments == ["A-9"]


# -- the analyzer on the proxy's traces -------------------------------------------------------


def test_analyze_flags_a_clients_duplicate_write_and_not_a_refused_repeat(tmp_path, shop, clock):
    from toolspan.analyzer import Analyzer
    from toolspan.tracer import setup_telemetry

    traces = tmp_path / "proxy.jsonl"
    telemetry = setup_telemetry("toolspan-mcp-proxy", json_path=traces, set_global=False)

    async def test():
        server = shop_server(shop)
        proxy = McpProxy(
            lambda: InMemoryTransport(server),
            parse_config(DECLARED),
            tracer_provider=telemetry.tracer_provider,
            sleep=clock.async_sleep,
            clock=clock,
        )
        unknown = {CONVERSATION_META_KEY: "conv-refused"}
        twice = {CONVERSATION_META_KEY: "conv-twice"}
        async with Client(ThroughProxy(proxy)) as client:
            lost = await client.call_tool("refund_order", {"order_id": "B-1"}, meta=unknown)
            refused = await client.call_tool("refund_order", {"order_id": "B-1"}, meta=unknown)
            for _ in range(2):  # the client repeats a write that had succeeded
                await client.call_tool("refund_order", {"order_id": "B-2"}, meta=twice)
        return lost, refused

    lost, refused = anyio.run(test)
    telemetry.shutdown()
    assert payload(lost)["status"] == "unsafe_retry"
    assert payload(refused)["status"] == "read_back_required"
    with Analyzer() as analyzer:
        analyzer.ingest([traces])
        findings = [(f.kind, f.conversation_id, f.tool) for f in analyzer.findings()]
    assert findings == [("duplicate_write", "conv-twice", "refund_order")]
    assert shop.refunds == ["B-1", "B-2", "B-2"]


@pytest.mark.slow
def test_the_example_drives_the_proxy_from_a_client_config(tmp_path):
    import subprocess
    import sys

    from toolspan.analyzer import Analyzer

    traces = tmp_path / "example.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "examples.mcp_proxy", "--out", str(traces)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "read_back_required" in done.stdout
    with Analyzer() as analyzer:
        analyzer.ingest([traces])
        rows = analyzer.query("SELECT tool, status FROM tool_calls ORDER BY start_time").rows
    assert rows == [
        ("get_order", "succeeded"),
        ("refund_order", "succeeded"),
        ("cancel_order", "unsafe_retry"),
        ("cancel_order", "read_back_required"),
        ("get_cancellation", "succeeded"),
    ]


def test_a_cancelled_call_is_cancelled_upstream_and_the_server_may_ask_the_client(
    shop, spans, clock
):
    async def on_elicit(context, params):
        assert params.message == "Refund A-10?"
        return mcp_types.ElicitResult(action="accept", content={"ok": True})

    async def test():
        shop.hanging, shop.cancelled = anyio.Event(), anyio.Event()
        proxy = make_proxy(shop, spans, clock, {"timeout_s": 30})
        async with Client(ThroughProxy(proxy), mode="legacy", elicitation_callback=on_elicit) as c:
            async with anyio.create_task_group() as group:
                group.start_soon(c.call_tool, "hang", {})
                await shop.hanging.wait()
                group.cancel_scope.cancel()  # the client gives up: notifications/cancelled
            with anyio.fail_after(5):
                await shop.cancelled.wait()  # ... reached the upstream's running tool
            return await c.call_tool("confirm_refund", {"order_id": "A-10"})

    confirmed = anyio.run(test)
    # The server's elicitation/create went to the client and its answer back.
    assert payload(confirmed)["status"] == "succeeded"
    assert confirmed.structured_content == {"result": "confirmed"}


def test_a_check_tool_the_upstream_lacks_is_a_clear_error_not_a_crash(shop, spans, clock):
    config = {
        "tools": {
            "refund_order": {"side_effect": "write", "check_with": "get_refund_state"},
            "get_refund_state": {"side_effect": "read"},
        }
    }

    async def test():
        async with Client(ThroughProxy(make_proxy(shop, spans, clock, config))) as client:
            refused = await client.call_tool("refund_order", {"order_id": "A-11"})
            listed = await client.list_tools()  # the rest still passes through
        return refused, listed

    refused, listed = anyio.run(test)
    assert refused.is_error and payload(refused)["error_code"] == "proxy_misconfigured"
    assert "get_refund_state" in payload(refused)["message"]
    assert shop.refunds == [] and listed.tools


@pytest.mark.slow
def test_the_cli_serves_streamable_http_in_front_of_a_stdio_upstream(tmp_path):
    import subprocess
    import sys

    from ..services import wait_for_port

    config = tmp_path / "proxy.toml"
    config.write_text('timeout_s = 10\n[tools.get_refund_status]\nside_effect = "read"\n')
    port = free_port()
    command = [sys.executable, "-m", "toolspan.cli", "mcp", "proxy", "--config", str(config)]
    command += ["--serve", "http", "--port", str(port)]
    command += ["--", sys.executable, "-m", "tests.integrations.mcp_proxy_server"]
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE)
    try:
        wait_for_port(port, timeout_s=60)

        async def test():
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=MODES[1]) as client:
                return await client.call_tool("get_refund_status", {"order_id": "A-12"})

        result = anyio.run(test)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert not result.is_error
    assert result.structured_content == {"result": "not refunded"}
    assert payload(result)["status"] == "succeeded"


# -- pass-through over stdio, byte for byte ---------------------------------------------------

# A scripted upstream writing JSON the way no SDK would (spacing, key order, escapes,
# fields the SDK's models drop); it keeps what it read and what it wrote, line by line.
SCRIPTED_UPSTREAM = r"""
import json, sys
read_log, sent_log = open(sys.argv[1], "ab", 0), open(sys.argv[2], "ab", 0)
for line in sys.stdin.buffer:
    read_log.write(line)
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    for out in (
        '{ "params" : {"level":"info", "data": "caf\\u00e9"} ,"method":"notifications/message",'
        '"jsonrpc":"2.0", "x-vendor": 1.50 }',
        '{"result": {"zeta": 1.0, "tools": [], "alpha": "\\u00e9\\/"}, "id": %s,  "jsonrpc": "2.0",'
        ' "x-vendor": [1, {"b": 2, "a": 1}]}' % json.dumps(message["id"]),
    ):
        sent_log.write(out.encode() + b"\n")
        sys.stdout.buffer.write(out.encode() + b"\n")
        sys.stdout.buffer.flush()
"""


def _read_lines(stream: Any, count: int, timeout_s: float) -> list[bytes]:
    # A selector, not select.select(): in the whole suite this process may hold
    # more than 1,024 descriptors, which select() refuses.
    import selectors
    import time

    lines: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while len(lines) < count:
            ready = selector.select(max(0.0, deadline - time.monotonic()))
            assert ready, f"only {len(lines)} of {count} lines within {timeout_s}s: {lines}"
            lines.append(stream.readline())
    return lines


@pytest.mark.slow
def test_over_stdio_what_is_relayed_arrives_byte_for_byte_both_ways(tmp_path):
    import subprocess
    import sys

    upstream = tmp_path / "upstream.py"
    upstream.write_text(SCRIPTED_UPSTREAM)
    read_log, sent_log, traces = tmp_path / "read", tmp_path / "sent", tmp_path / "spans.jsonl"
    config = tmp_path / "proxy.toml"
    config.write_text("timeout_s = 10\n")
    from_client = [
        b'{ "id" : 1, "jsonrpc":"2.0", "method":"tools/list", "params":{ "_meta": {"traceparent":'
        b' "' + TRACEPARENT.encode() + b'", "x-\\u00e9": 1.0}}, "x-vendor": null }\n',
        b'{"method":"notifications/roots/list_changed","jsonrpc":"2.0"  , "params": {} }\n',
        b'{"jsonrpc":"2.0","id":"r-2","method":"resources/read","params":{"uri":"shop://a b"}}\r\n',
    ]
    command = [sys.executable, "-m", "toolspan.cli", "mcp", "proxy", "--config", str(config)]
    command += ["--trace-file", str(traces), "--", sys.executable, str(upstream)]
    proxy = subprocess.Popen(
        [*command, str(read_log), str(sent_log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=str(REPO),
        bufsize=0,  # the selector sees what readline() has not read yet
    )
    try:
        for line in from_client:
            proxy.stdin.write(line)
        received = _read_lines(proxy.stdout, 4, timeout_s=30)  # two requests: 2 lines each
        proxy.stdin.close()
        assert proxy.wait(timeout=30) == 0
    finally:
        proxy.kill()
    assert read_log.read_bytes().splitlines(keepends=True) == from_client
    assert sorted(received) == sorted(sent_log.read_bytes().splitlines(keepends=True))
    # Relayed as bytes, the request still got its server span, in the client's trace.
    spans = [
        span
        for line in traces.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    listed = [s for s in spans if s["name"] == "tools/list"]
    assert [s["traceId"] for s in listed] == [TRACE_ID]


def test_a_call_cancelled_before_its_task_started_never_reaches_the_upstream(shop, spans, clock):
    proxy = make_proxy(shop, spans, clock)
    answers: list[Any] = []

    async def reply(message: Any) -> None:
        answers.append(message)

    def call(request_id: int) -> mcp_types.JSONRPCRequest:
        envelope = {  # the stateless protocol's per-request envelope: no handshake needed
            mcp_types.PROTOCOL_VERSION_META_KEY: MODES[1],
            mcp_types.CLIENT_INFO_META_KEY: {"name": "scripted", "version": "1"},
            mcp_types.CLIENT_CAPABILITIES_META_KEY: {},
        }
        params = {
            "name": "get_refund_status",
            "arguments": {"order_id": f"A-{request_id}"},
            "_meta": envelope,
        }
        return mcp_types.JSONRPCRequest(
            jsonrpc="2.0", id=request_id, method="tools/call", params=params
        )

    async def test():
        with anyio.fail_after(10):
            async with proxy.running():
                # Read one after the other, as off a pipe: the cancellation comes first.
                await proxy.handle(call(1), reply)
                cancel = {"requestId": 1, "reason": "changed my mind"}
                await proxy.handle(
                    mcp_types.JSONRPCNotification(
                        jsonrpc="2.0", method="notifications/cancelled", params=cancel
                    ),
                    reply,
                )
                await proxy.handle(call(2), reply)
                while not answers:
                    await anyio.sleep(0.01)
                proxy._task_group.cancel_scope.cancel()

    anyio.run(test)
    assert [answer.id for answer in answers] == [2]  # none for the cancelled call
    assert not answers[0].result["isError"]
    assert shop.calls.get("get_refund_status") == 1  # only call 2 ran upstream


@pytest.mark.parametrize("mode", MODES)
def test_an_answer_the_proxy_makes_has_the_fields_of_the_clients_protocol(shop, spans, clock, mode):
    async def test():
        wire = Recording(ThroughProxy(make_proxy(shop, spans, clock)))
        async with Client(wire, mode=mode) as client:
            result = await client.call_tool("no_such_tool", {})
        (call,) = [m for m in wire.sent if getattr(m, "method", None) == "tools/call"]
        (answer,) = [json.loads(t) for t in wire.received if json.loads(t).get("id") == call.id]
        return result, answer["result"]

    result, answer = anyio.run(test)
    assert result.is_error  # toolspan's own answer, not the server's
    # resultType is 2026-07-28's; a 2025-11-25 answer does not carry it.
    assert ("resultType" in answer) is (mode == "2026-07-28")
