"""The upstream MCP server of the proxy's tests (``mcp`` SDK), in process or on stdio.

A shop whose tools misbehave on plan: ``get_order`` fails once with a 503
and a ``Retry-After``, ``refund_order`` answers its first call late (after
the refund happened), ``crash`` ends the server process, ``hang`` never
answers. ``python -m tests.integrations.mcp_proxy_server`` serves it on stdio.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Sequence
from typing import Any

import anyio
import mcp_types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

LATE_S = 5.0  # far beyond the proxy's timeout in the tests


class Confirmation(BaseModel):
    ok: bool


class Shop:
    """The server's side: what each tool saw, and the effects that happened."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.metas: list[dict[str, Any]] = []
        self.refunds: list[str] = []
        self.flaky_reads = 1  # get_order fails this many times first
        self.late_writes = 1  # refund_order answers this many times late
        self.shipments: list[str] = []
        self.lost_task_results = 1  # tasks/result answers this many times late
        self.task_requests: list[str] = []  # the tasks extension's methods, in order
        self.hanging: anyio.Event | None = None  # set when `hang` starts
        self.cancelled: anyio.Event | None = None  # set when `hang` is cancelled
        self.gate: anyio.Event | None = None  # `wait_for_gate` answers once it is set

    def saw(self, name: str, ctx: Context) -> int:
        self.calls[name] = self.calls.get(name, 0) + 1
        self.metas.append(dict(ctx.request_context.meta or {}))
        return self.calls[name]


class ShopTasks(Extension):
    """The tasks extension (2026-07-28): a ``tools/call`` with ``task`` answers with a
    task at once; ``tasks/get`` says how it goes, ``tasks/result`` gives its result."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self, shop: Shop) -> None:
        self.shop = shop
        self.ids = itertools.count(1)
        self.running: dict[str, asyncio.Task[HandlerResult]] = {}

    async def intercept_tool_call(
        self,
        params: mcp_types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.task is None:
            return await call_next(ctx)
        task_id = f"task-{next(self.ids)}"
        self.running[task_id] = asyncio.ensure_future(call_next(ctx))
        return {"resultType": "task", "task": self._task(task_id)}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", mcp_types.GetTaskRequestParams, self._get),
            MethodBinding("tasks/result", mcp_types.GetTaskPayloadRequestParams, self._result),
        )

    def _task(self, task_id: str) -> dict[str, Any]:
        done = self.running[task_id].done()
        return {
            "taskId": task_id,
            "status": "completed" if done else "working",
            "createdAt": "2026-12-01T00:00:00Z",
            "lastUpdatedAt": "2026-12-01T00:00:00Z",
            "ttl": 60_000,
            "pollInterval": 10,
        }

    async def _get(self, ctx: Any, params: mcp_types.GetTaskRequestParams) -> HandlerResult:
        self.shop.task_requests.append("tasks/get")
        return self._task(params.task_id)

    async def _result(
        self, ctx: Any, params: mcp_types.GetTaskPayloadRequestParams
    ) -> HandlerResult:
        self.shop.task_requests.append("tasks/result")
        result = await self.running[params.task_id]
        if self.shop.task_requests.count("tasks/result") <= self.shop.lost_task_results:
            await anyio.sleep(LATE_S)  # the answer is lost on the way
        return result


def shop_server(shop: Shop) -> MCPServer:
    server = MCPServer("shop", extensions=[ShopTasks(shop)])

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    async def get_order(order_id: str, ctx: Context) -> mcp_types.CallToolResult:
        """Look up an order."""
        if shop.saw("get_order", ctx) <= shop.flaky_reads:
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(type="text", text="orders API answered 503")],
                structured_content={"error_code": "http_503", "retry_after": "2"},
                is_error=True,
            )
        order = {"order_id": order_id, "status": "shipped"}
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=order["status"])],
            structured_content=order,
        )

    @server.tool()
    async def refund_order(order_id: str, ctx: Context) -> str:
        """Refund an order."""
        shop.refunds.append(order_id)  # the effect happens before a late answer
        if shop.saw("refund_order", ctx) <= shop.late_writes:
            await anyio.sleep(LATE_S)
        return f"refunded {order_id}"

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    async def get_refund_status(order_id: str, ctx: Context) -> str:
        """Was the order refunded?"""
        shop.saw("get_refund_status", ctx)
        return "refunded" if order_id in shop.refunds else "not refunded"

    @server.tool()
    async def ship_order(order_id: str, ctx: Context) -> str:
        """Ship an order (a long job: run as a task)."""
        shop.saw("ship_order", ctx)
        shop.shipments.append(order_id)
        return f"shipped {order_id}"

    @server.tool()
    async def count_down(steps: int, ctx: Context) -> str:
        """Report progress on every step."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step}")
        return "done"

    @server.tool()
    async def wait_for_gate(ctx: Context) -> str:
        """Report progress, then answer once the test opens the gate."""
        shop.saw("wait_for_gate", ctx)
        await ctx.report_progress(1, 2, "waiting for the gate")
        if shop.gate is not None:
            await shop.gate.wait()
        return "through the gate"

    @server.tool()
    async def crash(ctx: Context) -> str:
        """End the server process mid-call."""
        os._exit(3)

    @server.tool()
    async def hang(ctx: Context) -> str:
        """Never answer (unless cancelled)."""
        if shop.hanging is not None:
            shop.hanging.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            if shop.cancelled is not None:
                shop.cancelled.set()
            raise
        raise AssertionError("unreachable")

    @server.tool()
    async def confirm_refund(order_id: str, ctx: Context) -> str:
        """Ask the user first (the server's own request to the client)."""
        answer = await ctx.elicit(f"Refund {order_id}?", schema=Confirmation)
        confirmed = answer.action == "accept" and answer.data.ok
        return "confirmed" if confirmed else "declined"

    @server.prompt()
    def greeting(name: str) -> str:
        """A prompt, relayed as it is."""
        return f"Hello {name}, how can I help?"

    @server.resource("shop://policy")
    def policy() -> str:
        """A resource, relayed as it is."""
        return "Refunds within 30 days."

    return server


if __name__ == "__main__":
    shop_server(Shop()).run("stdio")
