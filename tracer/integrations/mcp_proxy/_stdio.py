"""Serving the client on the process's stdin/stdout through the event loop's pipes.

The SDK's ``stdio_server`` reads and writes each line in a worker thread and
hands it over through a memory stream; a proxy handles two of those lines
per call on this side alone, so it reads and writes the pipes with asyncio's
own pipe transports instead, in the task that needs the line (no thread or
task hand-off per line). Where stdin or stdout is not a pipe (a file, a
terminal), the SDK's transport serves as before.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

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
    try:
        yield _Lines(reader), _Writer(writer)
    finally:
        writer.close()


class _Lines:
    """The client's messages, parsed in the task that reads them (no hand-off)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
        except Exception as exc:  # a line that is not JSON-RPC: reported, not fatal
            return exc


class _Writer:
    """Writes each message in the task that sends it: one line, whole (no hand-off)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, item: SessionMessage) -> None:
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._writer.write(text.encode() + b"\n")
        await self._writer.drain()  # returns at once unless the client reads slowly


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
