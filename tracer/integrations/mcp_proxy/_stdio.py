"""Serving the client on the process's stdin/stdout through the event loop's pipes.

The SDK's ``stdio_server`` reads and writes each line in a worker thread; a
proxy handles two of those lines per call on this side alone, so it reads
and writes the pipes with asyncio's own pipe transports instead (no thread
hand-off per line). Where stdin or stdout is not a pipe (a file, a
terminal), the SDK's transport serves as before.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

__all__ = ["stdio_streams"]

_LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message per line; large results happen


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """(read, write) streams of :class:`SessionMessage` over stdin/stdout."""
    try:
        reader, writer = await _pipes()
    except (OSError, ValueError):  # not pipes: the SDK's threaded transport
        from mcp.server.stdio import stdio_server

        async with stdio_server() as streams:
            yield streams
        return
    to_proxy, read = create_context_streams[SessionMessage | Exception](0)
    write, from_proxy = create_context_streams[SessionMessage](0)

    async def receive() -> None:
        async with to_proxy:
            while line := await reader.readline():
                try:
                    message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:  # a line that is not JSON-RPC: reported, not fatal
                    await to_proxy.send(exc)
                    continue
                await to_proxy.send(SessionMessage(message))

    async def send() -> None:
        async with from_proxy:
            async for item in from_proxy:
                text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                writer.write(text.encode() + b"\n")
                await writer.drain()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(receive)
            group.start_soon(send)
            yield read, write
            group.cancel_scope.cancel()
    finally:
        writer.close()


async def _pipes() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    stdout = os.fdopen(os.dup(1), "wb", buffering=0)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), stdout
        )
    except BaseException:
        stdin.close()
        stdout.close()
        raise
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)
