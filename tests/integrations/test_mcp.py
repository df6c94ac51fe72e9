"""The MCP adapter with a real MCP server and client session (in memory, JSON-RPC framing)."""

from __future__ import annotations

import random
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as ServerToolError
from mcp.shared.exceptions import MCPError
from opentelemetry.trace import format_trace_id

from toolspan.tracer import AsyncExecutor, Safeguards
from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.integrations.mcp import IDEMPOTENCY_META_KEY, GuardedSession, mcp_tools
from toolspan.tracer.store import MemoryStore, derive_key

TIMEOUT_S = 0.05  # the client's request timeout: a slow answer is really late


class Shop:
    """The server side: what each tool saw, and a plan of slow or failing answers."""

    def __init__(self) -> None:
        self.metas: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {}
        self.slow: set[tuple[str, int]] = set()
        self.cancelled: list[str] = []

    async def request(self, name: str, ctx: Context) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        self.metas.append(dict(ctx.request_context.meta or {}))
        if (name, self.calls[name]) in self.slow:
            await anyio.sleep(10 * TIMEOUT_S)  # the client has given up by then


def make_server(shop: Shop) -> MCPServer:
    server = MCPServer("shop")

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    async def get_order(order_id: str, ctx: Context) -> dict[str, str]:
        """Look up an order."""
        await shop.request("get_order", ctx)
        return {"order_id": order_id, "status": "shipped"}

    @server.tool()
    async def cancel_order(order_id: str, ctx: Context) -> str:
        """Cancel an order."""
        shop.cancelled.append(order_id)  # the effect happens before a late answer
        await shop.request("cancel_order", ctx)
        return f"cancelled {order_id}"

    @server.tool()
    async def refund(order_id: str, ctx: Context) -> str:
        await shop.request("refund", ctx)
        raise ServerToolError("refunds are closed today")  # -> an isError result

    @server.tool()
    async def strict(order_id: str, ctx: Context) -> str:
        await shop.request("strict", ctx)
        raise MCPError(mcp_types.INVALID_PARAMS, "unknown order")

    return server


@pytest.fixture
def shop() -> Shop:
    return Shop()


async def open_guarded(shop, spans, clock, session, **options) -> GuardedSession:
    def executor(tools):
        return AsyncExecutor(
            tools,
            tracer_provider=spans.provider,
            sleep=clock.async_sleep,
            clock=clock,
            rng=random.Random(0),
            safeguards=Safeguards(store=MemoryStore()),
        )

    return await GuardedSession.open(
        session, executor, conversation_id="cv", timeout_s=TIMEOUT_S, **options
    )


def run(test):
    anyio.run(test)


def test_tools_are_declared_from_the_servers_listing(shop):
    async def test():
        async with Client(make_server(shop), mode="legacy") as client:
            tools = {t.name: t for t in await mcp_tools(client.session)}
            hinted = {t.name: t for t in await mcp_tools(client.session, trust_annotations=True)}
            declared = {
                t.name: t
                for t in await mcp_tools(
                    client.session,
                    Declarations({"cancel_order": Declaration.write(idempotent=True)}),
                    trust_annotations=True,
                )
            }
        listed = tools["get_order"]
        assert listed.description == "Look up an order."
        assert listed.parameters["properties"]["order_id"]["type"] == "string"
        assert listed.parameters["required"] == ["order_id"]
        # The server says get_order is read-only; that counts only on opt-in.
        assert {t.side_effect for t in tools.values()} == {"write"}
        assert not any(t.idempotent for t in tools.values())
        assert hinted["get_order"].side_effect == "none"
        assert hinted["cancel_order"].side_effect == "write"
        assert declared["cancel_order"].idempotent

    run(test)


def test_a_call_runs_through_the_boundary_with_mcp_attributes_and_trace_context(shop, spans, clock):
    async def test():
        async with Client(make_server(shop), mode="legacy") as client:
            guarded = await open_guarded(
                shop,
                spans,
                clock,
                client.session,
                session_id="sess-7",
                declarations={"get_order": Declaration.read()},
            )
            shop.slow.add(("get_order", 1))
            return await guarded.call_tool("get_order", {"order_id": "A-1"}, call_id="c1")

    result = anyio.run(test)
    assert isinstance(result, mcp_types.CallToolResult) and not result.is_error
    payload = result.structured_content
    assert (payload["status"], payload["attempts"]) == ("succeeded", 2)
    assert payload["data"] == {"order_id": "A-1", "status": "shipped"}  # structured content
    call = spans.call()
    attrs = spans.attrs(call)
    assert attrs["mcp.method.name"] == "tools/call" and attrs["mcp.session.id"] == "sess-7"
    assert attrs["gen_ai.tool.call.id"] == "c1"
    first, second = spans.attempts()
    assert spans.attrs(first)["toolspan.attempt.outcome"] == "timeout"
    assert spans.attrs(second)["mcp.method.name"] == "tools/call"
    # Each attempt's trace context reached the server in params._meta.
    trace_id = format_trace_id(call.context.trace_id)
    assert [m["traceparent"].split("-")[1] for m in shop.metas] == [trace_id, trace_id]


def test_an_undeclared_tool_that_times_out_is_not_repeated(shop, spans, clock):
    async def test():
        async with Client(make_server(shop), mode="legacy") as client:
            guarded = await open_guarded(shop, spans, clock, client.session)
            shop.slow.add(("cancel_order", 1))
            return await guarded.execute("cancel_order", {"order_id": "A-2"}, request_id="r1")

    result = anyio.run(test)
    assert (result.status, result.attempts) == ("unsafe_retry", 1)
    assert shop.cancelled == ["A-2"]
    (attempt,) = spans.attempts()
    assert spans.attrs(attempt)["toolspan.attempt.outcome"] == "timeout"


def test_a_keyed_write_sends_its_key_to_the_server_on_every_attempt(shop, spans, clock):
    declarations = Declarations({"cancel_order": Declaration.write(idempotent=True)})

    async def test():
        async with Client(make_server(shop), mode="legacy") as client:
            guarded = await open_guarded(
                shop, spans, clock, client.session, declarations=declarations
            )
            shop.slow.add(("cancel_order", 1))
            return await guarded.execute("cancel_order", {"order_id": "A-2"}, request_id="r1")

    result = anyio.run(test)
    assert (result.status, result.attempts) == ("succeeded", 2)
    key = derive_key("r1", "cancel_order")
    assert [m[IDEMPOTENCY_META_KEY] for m in shop.metas] == [key, key]


def test_errors_become_classified_error_results(shop, spans, clock):
    async def test():
        async with Client(make_server(shop), mode="legacy") as client:
            guarded = await open_guarded(shop, spans, clock, client.session)
            return (
                await guarded.call_tool("refund", {"order_id": "A-1"}),
                await guarded.call_tool("strict", {"order_id": "A-1"}),
                await guarded.call_tool("get_order", {"order_id": 7}),
                await guarded.call_tool("nope", {}),
            )

    refused, invalid, bad_args, unknown = anyio.run(test)
    assert all(r.is_error for r in (refused, invalid, bad_args, unknown))
    assert refused.structured_content["status"] == "permanent_error"
    assert refused.structured_content["error_code"] == "mcp_tool_error"
    assert "refunds are closed today" in refused.structured_content["message"]
    assert invalid.structured_content["error_code"] == "jsonrpc_invalid_params"
    # The server's own schema, checked before anything is sent.
    assert bad_args.structured_content["status"] == "invalid_arguments"
    assert unknown.structured_content["status"] == "unknown_tool"
    assert shop.calls == {"refund": 1, "strict": 1}


def test_a_closed_connection_is_a_connection_error(shop, spans, clock):
    async def test():
        async with Client(make_server(shop), mode="legacy") as client:
            guarded = await open_guarded(
                shop, spans, clock, client.session, declarations={"get_order": Declaration.read()}
            )
        return await guarded.execute("get_order", {"order_id": "A-1"})

    result = anyio.run(test)
    assert result.ok is False
    outcomes = {spans.attrs(a)["toolspan.attempt.outcome"] for a in spans.attempts()}
    assert outcomes == {"connection_error"}


@pytest.mark.slow
def test_over_stdio_with_the_example_server_as_a_subprocess(spans, clock):
    import sys
    from pathlib import Path

    from mcp import StdioServerParameters

    from examples.mcp_agent import classify

    repo = Path(__file__).resolve().parents[2]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "examples.mcp_server"], cwd=str(repo)
    )

    async def test():
        async with Client(params, mode="legacy") as client:
            guarded = await open_guarded(
                None,
                spans,
                clock,
                client.session,
                classify=classify,
                declarations={"get_order": Declaration.read()},
            )
            return await guarded.call_tool("get_order", {"order_id": "A-1001"}, call_id="s1")

    result = anyio.run(test)
    payload = result.structured_content
    # The example's fault plan answers the first get_order with a 503 (an isError
    # result the classifier names http_503): retried, then the order.
    assert not result.is_error and payload["attempts"] == 2
    assert payload["data"]["order_id"] == "A-1001"
    assert [spans.attrs(a)["toolspan.attempt.outcome"] for a in spans.attempts()] == [
        "http_503",
        "ok",
    ]
    assert spans.attrs(spans.call())["mcp.method.name"] == "tools/call"


def test_a_server_asking_for_input_mid_call_ends_the_call_for_the_model(spans, clock):
    server = MCPServer("asks")

    @server.tool()
    async def confirm_refund(order_id: str) -> mcp_types.InputRequiredResult:
        return mcp_types.InputRequiredResult(request_state=f"confirm:{order_id}")

    async def test():
        async with Client(server) as client:  # the 2026 protocol, where servers may ask
            guarded = await open_guarded(None, spans, clock, client.session)
            return await guarded.call_tool("confirm_refund", {"order_id": "A-1"})

    result = anyio.run(test)
    assert result.is_error
    payload = result.structured_content
    assert (payload["status"], payload["error_code"]) == ("permanent_error", "mcp_input_required")


def asking_server(seen: list[Any]) -> Any:
    """A server whose write asks the user first, the 2026-07-28 way: an
    ``InputRequiredResult``, then the client's retry with its answer."""
    server = MCPServer("asking")

    @server.tool()
    async def approve_refund(order_id: str, ctx: Context) -> str | mcp_types.InputRequiredResult:
        """Refund once the user approves."""
        answer = (ctx.input_responses or {}).get("approve")
        seen.append((ctx.request_state, answer))
        if answer is None:
            schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            ask = mcp_types.ElicitRequestFormParams(
                message=f"Refund {order_id}?", requested_schema=schema
            )
            return mcp_types.InputRequiredResult(
                input_requests={"approve": mcp_types.ElicitRequest(params=ask)},
                request_state=f"asked:{order_id}",
            )
        assert isinstance(answer, mcp_types.ElicitResult)
        approved = answer.action == "accept" and (answer.content or {}).get("ok") is True
        return f"refunded {order_id}" if approved else "declined"

    return server


def test_a_server_asking_for_input_mid_call_gets_the_sessions_answer(spans, clock):
    seen: list[Any] = []
    server = asking_server(seen)

    async def on_elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="accept", content={"ok": True})

    async def test():
        async with Client(server, elicitation_callback=on_elicit) as client:
            guarded = await open_guarded(None, spans, clock, client.session)
            return await guarded.call_tool("approve_refund", {"order_id": "A-2"})

    result = anyio.run(test)
    # Before: mcp_input_required; now the session's callback answers, within one attempt.
    assert not result.is_error, result.structured_content
    assert result.structured_content["status"] == "succeeded"
    assert result.structured_content["attempts"] == 1
    assert [state for state, _ in seen] == [None, "asked:A-2"]
