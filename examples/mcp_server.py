"""The support desk as a real MCP server (``mcp`` 2.x ``MCPServer``).

Each tool fronts one support-desk service. A service failure with an HTTP
status comes back as an ``isError`` result whose structured content names
the code (this server's convention, read by the client's ``classify``); a
service that does not answer in time makes the tool answer late, after the
client's request timeout, as a real slow backend would. The refund tool
forwards the ``toolspan/idempotency-key`` the client puts in ``_meta`` to
the payments API, which replays a known key's answer.

Run it on stdio with ``python -m examples.mcp_server`` (with the example's fault plan).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from toolspan.tracer import ToolError
from toolspan.tracer.integrations.mcp import IDEMPOTENCY_META_KEY

from .support_desk import SupportDesk

__all__ = ["support_server"]

_READ = ToolAnnotations(read_only_hint=True)


def support_server(desk: SupportDesk, *, late_s: float = 2.0, traced: bool = True) -> MCPServer:
    """The MCP server over ``desk``; a timed-out service answers after ``late_s``.

    ``traced=False`` drops the SDK's server-side OpenTelemetry middleware (its
    documented opt-out): in one process it would write the server's spans
    into the agent's trace file, where a real server exports its own.
    """
    server = MCPServer("support-desk")
    if not traced:
        lowlevel = server._lowlevel_server  # the SDK's own transports reach it the same way
        lowlevel.middleware = [
            m for m in lowlevel.middleware if type(m).__name__ != "OpenTelemetryMiddleware"
        ]

    async def answer(service: Callable[[], Any]) -> CallToolResult:
        try:
            data = service()
        except ToolError as exc:
            return CallToolResult(
                content=[TextContent(type="text", text=exc.message)],
                structured_content={"error_code": exc.code},
                is_error=True,
            )
        except TimeoutError:
            await anyio.sleep(late_s)  # the client stopped waiting long ago
            return CallToolResult(content=[TextContent(type="text", text="late")], is_error=True)
        text = json.dumps(data)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=data
        )

    @server.tool(annotations=_READ)
    async def get_order(order_id: str) -> CallToolResult:
        """Look up an order."""
        return await answer(lambda: desk.get_order(order_id))

    @server.tool(annotations=_READ)
    async def track_shipment(order_id: str) -> CallToolResult:
        """Where is the parcel?"""
        return await answer(lambda: desk.track_shipment(order_id))

    @server.tool(annotations=_READ)
    async def check_inventory(sku: str) -> CallToolResult:
        """Stock level of a SKU."""
        return await answer(lambda: desk.check_inventory(sku))

    @server.tool()
    async def refund_order(
        order_id: str, amount_cents: int, reason: str, ctx: Context
    ) -> CallToolResult:
        """Refund an order (the payments API honours idempotency keys)."""
        key = (ctx.request_context.meta or {}).get(IDEMPOTENCY_META_KEY)
        return await answer(lambda: desk.refund_with_key(key, order_id, amount_cents, reason))

    @server.tool()
    async def send_email(to: str, subject: str, body: str) -> CallToolResult:
        """Send an e-mail (a legacy API: no keys, no read-back)."""
        return await answer(lambda: desk.send_email(to, subject, body))

    @server.tool()
    async def cancel_order(order_id: str) -> CallToolResult:
        """Cancel an order."""
        return await answer(lambda: desk.cancel_order(order_id))

    @server.tool(annotations=_READ)
    async def get_cancellation(order_id: str) -> CallToolResult:
        """Was the order cancelled? (empty when it was not)"""
        return await answer(lambda: desk.get_cancellation(order_id) or {})

    return server


if __name__ == "__main__":
    from .scenario import EXAMPLE_FAULTS

    support_server(SupportDesk(faults=EXAMPLE_FAULTS)).run("stdio")
