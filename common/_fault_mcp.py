"""The kit between ``toolspan mcp proxy`` and an MCP server: faults per ``tools/call``.

:func:`proxy_target` checks an MCP server's tools the way a client reaches
them through the proxy: an :class:`~toolspan.tracer.integrations.mcp_proxy.McpProxy`
in this process, on the kit's clock, in front of the server (an ``MCPServer``,
in memory) with the kit's faults on the link between them. Each ``tools/call``
the proxy sends takes the plan's next fault:

- ``ok``, ``slow``: the server answers (``slow``: the kit's clock moves first);
- ``http_status``: the server is not asked; the proxy gets an ``isError``
  result naming ``error_code`` (``http_<status>``) and ``retry_after`` in its
  structured content, the fields the proxy's config names (``error_code_field``,
  ``retry_after_field``);
- ``connection_reset``: the server is not asked; the link closes;
- ``timeout_after_commit``, ``late_commit``: the server runs the call and its
  answer never arrives: the proxy's own timeout ends the attempt. That timer
  is the proxy's (anyio's, real time), so the check runs the proxy with
  ``timeout_s`` of :data:`LOST_ANSWER_TIMEOUT_S` (50 ms) unless the config asks
  for less. A server in this process commits at once: ``late_commit`` is a
  lost answer here;
- ``response_lost``: the server runs the call, then the link closes before
  its answer (an upstream that died after the work: ``connection_error``).

The proxy connects again (the handshake replayed) for its next request, to the
same server object: what the server's tools recorded in the kit's ledger stays.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp.client._memory import InMemoryTransport
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCRequest, JSONRPCResponse, RequestId

from ._check import CheckTarget
from ._faults import FaultInjector, retry_after_value

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ._faultkit import FaultKit
    from .tracer import ToolCall

__all__ = ["LOST_ANSWER_TIMEOUT_S", "mcp_upstream", "proxy_target"]

LOST_ANSWER_TIMEOUT_S = 0.05

Connect = Callable[[], Any]


def mcp_upstream(kit: FaultKit, server: MCPServer) -> Connect:
    """A proxy upstream: ``server`` in memory behind the kit's faults (see the module)."""

    @asynccontextmanager
    async def connect() -> AsyncIterator[tuple[Any, Any]]:
        async with InMemoryTransport(server) as (read, write):
            to_proxy, proxy_reads = anyio.create_memory_object_stream[Any](math.inf)
            link = _Link(kit.injector, write, to_proxy)
            async with anyio.create_task_group() as group:
                group.start_soon(link.pump, read)
                try:
                    yield proxy_reads, link
                finally:
                    group.cancel_scope.cancel()

    return connect


class _Link:
    """The proxy's write stream: each ``tools/call`` through the kit's next fault."""

    def __init__(self, injector: FaultInjector, server_write: Any, to_proxy: Any) -> None:
        self._injector = injector
        self._server_write = server_write
        self._to_proxy = to_proxy
        self._lost: set[RequestId] = set()  # answers the proxy never gets
        self._cut: set[RequestId] = set()  # answers the link dies with

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if not (isinstance(message, JSONRPCRequest) and message.method == "tools/call"):
            await self._server_write.send(item)
            return
        injector = self._injector
        injector.ledger.land_due(injector.clock())
        fault = injector.plan.next_for(message)
        name = (message.params or {}).get("name")
        injector.log.append((f"tools/call {name}", fault.label))
        injector.ledger.requests += 1
        if fault.kind == "status":
            await self._to_proxy.send(SessionMessage(_refusal(message, fault, injector)))
        elif fault.kind == "connection_reset":
            await self._to_proxy.aclose()
        else:
            if fault.kind == "slow":
                injector.clock.advance(fault.delay_s)
            elif fault.kind == "response_lost":
                self._cut.add(message.id)
            elif fault.kind != "ok":
                self._lost.add(message.id)
            await self._server_write.send(item)

    async def pump(self, read: Any) -> None:
        """The server's messages to the proxy, until an answer is lost."""
        async for item in read:
            message = getattr(item, "message", None)
            if isinstance(message, JSONRPCResponse) and message.id in self._cut:
                await self._to_proxy.aclose()  # the link dies with the answer
                return
            if isinstance(message, JSONRPCResponse) and message.id in self._lost:
                continue
            try:
                await self._to_proxy.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return

    async def aclose(self) -> None:
        await self._to_proxy.aclose()


def _refusal(message: JSONRPCRequest, fault: Any, injector: FaultInjector) -> JSONRPCResponse:
    content: dict[str, Any] = {"error_code": f"http_{fault.status}"}
    retry_after = retry_after_value(fault, injector.wall)
    if retry_after is not None:
        content["retry_after"] = retry_after
    result = {
        "content": [{"type": "text", "text": f"HTTP {fault.status} (injected)"}],
        "structuredContent": content,
        "isError": True,
    }
    return JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)


def proxy_target(
    kit: FaultKit,
    server: MCPServer,
    config: Mapping[str, Any],
    *,
    arguments: Mapping[str, Mapping[str, Any]] | None = None,
) -> CheckTarget:
    """A :class:`CheckTarget`: the config's tools called through ``toolspan mcp proxy``
    (in this process, the real ``mcp`` client in front) to ``server``.

    ``config`` is the proxy's config as its TOML reads (a mapping); its
    ``tools`` are the ones checked, ``arguments`` a valid call's per tool.
    """
    from mcp import Client

    from .tracer.integrations.mcp_proxy import CONVERSATION_META_KEY, McpProxy, parse_config
    from .tracer.integrations.mcp_proxy._memory import ThroughProxy
    from .tracer.integrations.mcp_proxy._proxy import REQUEST_META_KEY

    asked = dict(config)
    timeout_s = min(float(asked.get("timeout_s", LOST_ANSWER_TIMEOUT_S)), LOST_ANSWER_TIMEOUT_S)
    parsed = parse_config({**asked, "timeout_s": timeout_s})

    async def run(call: ToolCall) -> Any:
        proxy = McpProxy(
            mcp_upstream(kit, server),
            parsed,
            conversation_id=call.conversation_id,
            hooks=[kit.hook],
            **kit.executor_options(asynchronous=True),
        )
        meta = {CONVERSATION_META_KEY: call.conversation_id, REQUEST_META_KEY: call.request_id}
        async with Client(ThroughProxy(proxy), mode="legacy") as client:
            arguments = dict(call.arguments) if isinstance(call.arguments, Mapping) else {}
            return await client.call_tool(call.name, arguments, meta=cast(Any, meta))

    return CheckTarget(
        run=run, declarations=_as_proxied(parsed.declarations()), arguments=arguments or {}
    )


def _as_proxied(declarations: Any) -> Any:
    """The config's declarations as the proxy builds its tools: an idempotent write's
    key travels in the call's ``_meta``."""
    import dataclasses

    from .tracer.integrations import Declarations
    from .tracer.integrations.mcp_proxy._proxy import KEY_PASSED

    declared = {}
    for name in declarations.names:
        declaration = declarations.get(name)
        if declaration.idempotent and declaration.key_passed is None:
            declaration = dataclasses.replace(declaration, key_passed=KEY_PASSED)
        declared[name] = declaration
    return Declarations(declared, namespace=declarations.namespace, default=declarations.default)
