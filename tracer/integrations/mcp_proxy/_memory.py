"""The proxy in this process as an ``mcp.Client`` transport, over memory streams.

For the test kit (``toolspan.testing.mcp_proxy_target``) and tests: a client
talks to :class:`~toolspan.tracer.integrations.mcp_proxy.McpProxy` as it would
over stdio, with no process in between.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from mcp.shared.memory import create_client_server_memory_streams

from ._proxy import McpProxy

__all__ = ["StreamsTransport", "ThroughProxy"]


class StreamsTransport:
    """An ``mcp.Client`` transport made of one ``_connect`` context manager that
    yields the (read, write) streams (as ``mcp``'s own ``InMemoryTransport``)."""

    _cm: Any = None

    def _connect(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    async def __aenter__(self) -> Any:
        self._cm = self._connect()
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._cm.__aexit__(*exc)


class ThroughProxy(StreamsTransport):
    """An ``mcp.Client`` transport: ``proxy`` served over memory streams."""

    def __init__(self, proxy: McpProxy) -> None:
        self.proxy = proxy

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Any]:
        streams = create_client_server_memory_streams()
        async with streams as (client, server), anyio.create_task_group() as group:
            group.start_soon(self.proxy.serve, *server)
            yield client
            group.cancel_scope.cancel()
