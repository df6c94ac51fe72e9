"""Both stdio sides of the proxy through the event loop's pipes.

The SDK's ``stdio_server`` reads and writes each line in a worker thread and
its ``stdio_client`` in tasks of its own, handing every line over through a
memory stream. A proxy handles four lines per call (two on each side), so
it reads and writes the pipes with asyncio's own transports instead, in the
task that needs the line (no thread or task hand-off per line). Where the
proxy's stdin or stdout is not a pipe (a file, a terminal), the SDK's
``stdio_server`` serves as before.

A message read off a pipe keeps its line (:func:`wire_of`): relayed to the
other side unchanged, it is written as those bytes, not serialised again, so
what the proxy passes through arrives byte for byte (key order, spacing,
escapes, fields the SDK's models do not know). A message the proxy makes or
changes is a new model, serialised as usual."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, cast

import anyio
import orjson
from mcp.client.stdio import PROCESS_TERMINATION_TIMEOUT
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp_types import (
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

__all__ = ["parse_line", "server_process", "stdio_streams", "wire_of"]

_LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message per line; large results happen
_RUNNING: set[int] = set()  # the pids (and process groups) of the servers started


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


# The SDK's message models, each with a slot for the line it was read from. A
# slot, not a field: pydantic neither validates, serialises nor copies it, so a
# ``model_copy(update=...)`` (a changed message) has no line and is serialised.
class _WireRequest(JSONRPCRequest):
    __slots__ = ("wire",)


class _WireNotification(JSONRPCNotification):
    __slots__ = ("wire",)


class _WireResponse(JSONRPCResponse):
    __slots__ = ("wire",)


class _WireError(JSONRPCError):
    __slots__ = ("wire",)


_WIRED = (_WireRequest, _WireNotification, _WireResponse, _WireError)


def parse_line(line: bytes) -> JSONRPCMessage:
    """One JSON-RPC message from its line, validated; it keeps the line for :func:`wire_of`.

    Raises ``ValueError`` (``orjson.JSONDecodeError`` or pydantic's
    ``ValidationError``) for a line that is not a JSON-RPC message.
    """
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        # What orjson refuses and pydantic reads (NaN, integers beyond 64 bits) is read
        # as the SDK reads it, without its line; what neither reads is refused.
        return jsonrpc_message_adapter.validate_json(line, by_name=False)
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON-RPC message: a JSON {type(data).__name__}")
    model: type[JSONRPCMessage]
    if "method" in data:
        model = _WireRequest if "id" in data else _WireNotification
    else:
        model = _WireError if "error" in data else _WireResponse
    try:
        message = model.model_validate(data)
    except ValidationError:
        # Not the shape its keys suggest: read as the SDK reads any line (or refused as it
        # refuses it), without its line, so it is serialised when relayed.
        return jsonrpc_message_adapter.validate_python(data, by_name=False)
    object.__setattr__(message, "wire", line.rstrip(b"\n"))  # pydantic's setattr refuses slots
    return message


def wire_of(message: JSONRPCMessage) -> bytes | None:
    """The line ``message`` was read from, when it is unchanged since (else ``None``)."""
    if type(message) not in _WIRED:
        return None
    try:
        line: bytes = message.wire  # type: ignore[union-attr]
    except AttributeError:  # a copy (``model_copy``): its slot is empty, it may have changed
        return None
    return line


class _Lines:
    """Messages from a pipe, parsed in the task that reads them (no hand-off)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        try:
            return SessionMessage(parse_line(line))
        except Exception as exc:  # a line that is not JSON-RPC: reported, not fatal
            return exc


class _Writer:
    """Writes each message to a pipe in the task that sends it: one line, whole (no hand-off)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def send(self, item: SessionMessage) -> None:
        line = wire_of(item.message)
        if line is None:
            line = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        if self._writer.is_closing():
            raise anyio.BrokenResourceError("the other side closed the pipe")
        try:
            self._writer.write(line + b"\n")  # one write: the line and its end together
            await self._writer.drain()  # returns at once unless the reader is slow
        except (ConnectionError, RuntimeError) as exc:
            raise anyio.BrokenResourceError("the other side closed the pipe") from exc


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


@asynccontextmanager
async def server_process(
    command: str, args: list[str], cwd: str | None
) -> AsyncIterator[tuple[Any, Any]]:
    """(read, write) streams of :class:`SessionMessage` over a server process's stdout/stdin.

    Started as the SDK's ``stdio_client`` starts it (a session of its own,
    stderr inherited), except for the environment: the proxy's own, whole, since
    what an MCP client's config sets for the server (its API tokens) is set on
    the proxy once the server is wrapped. Stopped as the SDK stops it: stdin
    closed, a grace period, then the process group terminated.
    """
    process = await asyncio.create_subprocess_exec(
        command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=dict(os.environ),
        cwd=cwd,
        start_new_session=True,
        limit=_LINE_LIMIT,
    )
    assert process.stdin is not None and process.stdout is not None
    _RUNNING.add(process.pid)
    try:
        yield _Lines(process.stdout), _Writer(process.stdin)
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)
        _RUNNING.discard(process.pid)


def terminate_servers() -> None:
    """Send SIGTERM to every server process still running (their process groups).

    For a proxy told to stop (SIGTERM) while a server is still in its grace
    period: the server runs in a session of its own, so nothing else would
    reach it, and it would outlive the proxy."""
    for pid in list(_RUNNING):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)


async def _stop(process: asyncio.subprocess.Process) -> None:
    assert process.stdin is not None
    with suppress(OSError, RuntimeError):
        process.stdin.close()
    with anyio.move_on_after(PROCESS_TERMINATION_TIMEOUT):
        while process.returncode is None:
            await anyio.sleep(0.01)  # not wait(): it also waits for the pipes' EOF
        return
    # duck-typed: it reads the pid and returncode only
    await terminate_posix_process_tree(cast(Any, process), PROCESS_TERMINATION_TIMEOUT)
