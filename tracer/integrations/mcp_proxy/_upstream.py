"""One connection to the upstream MCP server: send messages, await answers, reconnect.

The proxy relays JSON-RPC messages as they are. Requests it forwards keep
their client's id; requests it makes itself (tool attempts, ``tools/list``,
``tasks/get``) get ids of their own (``toolspan-N``), so the two never collide.
When the upstream closes (a crashed server process), every waiting request
fails at once and the next message opens a new connection; a handshake-era
session is initialized again with the client's own ``initialize``.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCNotification, JSONRPCRequest, RequestId

from ..._errors import ToolError
from ._stdio import server_process

__all__ = ["CLOSED", "Connect", "Pending", "Upstream", "http_upstream", "stdio_upstream"]

_log = logging.getLogger("toolspan.mcp_proxy")

Streams = tuple[Any, Any]  # (read stream of SessionMessage | Exception, write stream)
Connect = Callable[[], AbstractAsyncContextManager[Streams]]
Deliver = Callable[[JSONRPCMessage], Awaitable[None]]
Answer = mcp_types.JSONRPCResponse | JSONRPCError


# The error code of a request the upstream never answered because it went away
# (its process died, the socket broke): the request may or may not have run.
CLOSED = "connection_error"


def _closed(message: str = "the upstream MCP server closed the connection") -> ToolError:
    return ToolError(CLOSED, message)


def stdio_upstream(command: str, args: list[str], *, cwd: str | None = None) -> Connect:
    """Launch ``command args``; talk over its stdin/stdout (a new process per connection).

    On POSIX through the event loop's pipes, each line read and written in the
    task that needs it; elsewhere through the SDK's ``stdio_client``.
    """
    if sys.platform == "win32":  # pragma: no cover
        params = StdioServerParameters(command=command, args=args, cwd=cwd, env=dict(os.environ))
        return lambda: stdio_client(params)
    return lambda: server_process(command, args, cwd)


def http_upstream(url: str) -> Connect:
    """A streamable HTTP upstream at ``url``."""

    def connect() -> AbstractAsyncContextManager[Streams]:
        return streamable_http_client(url)

    return connect


@dataclass
class Pending:
    """A request sent upstream, waiting for its answer."""

    done: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer | None = None
    closed: bool = False
    failure: ToolError | None = None  # the send failed: no answer will come


class Upstream:
    """The upstream server behind the proxy; ``deliver`` receives what it sends unasked.

    ``http`` stamps the streamable HTTP routing headers a 2026-07-28 request
    needs (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``) from the
    request itself, as the SDK's own client does.
    """

    def __init__(
        self,
        connect: Connect,
        deliver: Deliver,
        *,
        http: bool = False,
        startup_timeout_s: float = 30.0,
    ) -> None:
        self._connect = connect
        self.startup_timeout_s = startup_timeout_s
        # Set once the current connection has said anything: a server process that
        # is still starting does not count against a request's timeout.
        self._up = anyio.Event()
        self._deliver = deliver
        self._http = http
        self._ids = itertools.count(1)
        self._waiters: dict[RequestId, Pending] = {}
        self._write: Any = None
        self._ready: anyio.Event | None = None
        self._lock = anyio.Lock()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._handshake: JSONRPCRequest | None = None
        self.protocol_version: str | None = None  # negotiated by a handshake-era initialize

    async def run(self, task_group: anyio.abc.TaskGroup) -> None:
        """Use ``task_group`` for the connection's reader (connects on the first message)."""
        self._task_group = task_group

    def next_id(self) -> str:
        return f"toolspan-{next(self._ids)}"

    async def send(self, message: JSONRPCMessage) -> None:
        """Send one message as it is (connecting first when there is no connection)."""
        write = await self._connected()
        if isinstance(message, JSONRPCRequest) and message.method == "initialize":
            self._handshake = message  # replayed after a reconnect
        try:
            await write.send(SessionMessage(message, self._metadata(message)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise _closed() from exc

    async def request(self, message: JSONRPCRequest, *, timeout_s: float | None) -> Answer:
        """Send ``message`` and wait for its answer; on timeout tell the upstream to stop.

        Raises ``ToolError("timeout")`` after ``timeout_s`` and
        ``ToolError("connection_error")`` when the connection ends first.
        """
        return await self.answer(message, await self.start(message), timeout_s=timeout_s)

    async def start(self, message: JSONRPCRequest) -> Pending:
        """Send ``message``; :meth:`answer` waits for its answer. A failed send is
        kept for :meth:`answer` to raise, so the caller answers it as any failure."""
        pending = Pending()
        self._waiters[message.id] = pending
        try:
            await self.send(message)
        except ToolError as exc:
            self._waiters.pop(message.id, None)
            pending.failure = exc
        except BaseException:  # cancelled while sending: it may have gone out
            self._waiters.pop(message.id, None)
            with anyio.CancelScope(shield=True):
                await self._cancel(message.id, "the proxy stopped waiting")
            raise
        return pending

    async def answer(
        self, message: JSONRPCRequest, pending: Pending, *, timeout_s: float | None
    ) -> Answer:
        """The answer to ``message`` sent by :meth:`start` (its errors as :meth:`request`'s)."""
        if pending.failure is not None:
            raise pending.failure
        try:
            if not self._up.is_set():
                with anyio.move_on_after(self.startup_timeout_s):
                    await self._up.wait()
            with anyio.move_on_after(timeout_s):
                await pending.done.wait()
        finally:
            self._waiters.pop(message.id, None)
            if not pending.done.is_set():
                with anyio.CancelScope(shield=True):
                    await self._cancel(message.id, "the proxy stopped waiting")
        if pending.answer is not None:
            return pending.answer
        if pending.closed:
            raise _closed()
        raise ToolError("timeout", f"the upstream MCP server did not answer within {timeout_s:g}s")

    def expect(self, request_id: RequestId) -> bool:
        """True while a request with this id is waiting for its answer."""
        return request_id in self._waiters

    async def _cancel(self, request_id: RequestId, reason: str) -> None:
        if self._write is None:
            return
        cancelled = JSONRPCNotification(
            jsonrpc="2.0",
            method="notifications/cancelled",
            params={"requestId": request_id, "reason": reason},
        )
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._write.send(SessionMessage(cancelled, None))

    async def _connected(self) -> Any:
        if self._write is not None:  # connected: no lock, whose acquiring yields to the loop
            return self._write
        async with self._lock:
            if self._write is not None:
                return self._write
            assert self._task_group is not None, "Upstream.run was not called"
            ready = anyio.Event()
            failure: list[BaseException] = []
            self._task_group.start_soon(self._hold, ready, failure)
            await ready.wait()
            if failure:
                raise _closed(
                    f"the upstream MCP server could not be started: {failure[0]}"
                ) from failure[0]
            if self._handshake is not None:
                await self._replay_handshake(self._handshake)
            return self._write

    async def _hold(self, ready: anyio.Event, failure: list[BaseException]) -> None:
        """Own one connection: read from it until it closes, then fail every waiter."""
        try:
            async with self._connect() as (read, write):
                self._up = anyio.Event()
                self._write = write
                ready.set()
                await self._read_all(read)
        except Exception as exc:  # a server that cannot start or a broken transport
            if not ready.is_set():
                failure.append(exc)
            else:
                _log.warning("upstream connection failed: %s", exc)
        finally:
            self._write = None
            self._up.set()
            ready.set()
            for waiter in list(self._waiters.values()):
                waiter.closed = True
                waiter.done.set()

    async def _read_all(self, read: Any) -> None:
        async for item in read:
            self._up.set()
            if isinstance(item, Exception):
                _log.warning("the upstream sent a message that is not JSON-RPC: %s", item)
                continue
            message = item.message
            if isinstance(message, mcp_types.JSONRPCResponse | JSONRPCError):
                waiter = self._waiters.get(message.id) if message.id is not None else None
                if waiter is not None:
                    self._note_version(message)
                    waiter.answer = message
                    waiter.done.set()
                continue  # a late answer to a request nobody waits for any more
            await self._deliver(message)

    def _note_version(self, answer: Answer) -> None:
        if isinstance(answer, mcp_types.JSONRPCResponse):
            version = answer.result.get("protocolVersion")
            if isinstance(version, str):
                self.protocol_version = version

    async def _replay_handshake(self, handshake: JSONRPCRequest) -> None:
        """A restarted handshake-era server needs the client's ``initialize`` again."""
        again = JSONRPCRequest(
            jsonrpc="2.0", id=self.next_id(), method="initialize", params=handshake.params
        )
        waiter = Pending()
        self._waiters[again.id] = waiter
        try:
            await self._write.send(SessionMessage(again, self._metadata(again)))
            with anyio.move_on_after(self.startup_timeout_s):
                await waiter.done.wait()
        finally:
            self._waiters.pop(again.id, None)
        initialized = JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")
        if self._write is not None:
            await self._write.send(SessionMessage(initialized, None))

    def _metadata(self, message: JSONRPCMessage) -> ClientMessageMetadata | None:
        if not (self._http and isinstance(message, JSONRPCRequest)):
            return None
        return ClientMessageMetadata(headers=routing_headers(message))


def routing_headers(message: JSONRPCRequest) -> dict[str, str]:
    """The streamable HTTP headers of a 2026-07-28 request (none for handshake-era ones)."""
    params: Mapping[str, Any] = message.params or {}
    meta = params.get("_meta")
    version = meta.get(mcp_types.PROTOCOL_VERSION_META_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(version, str):
        return {}
    headers = {MCP_PROTOCOL_VERSION_HEADER: version, MCP_METHOD_HEADER: message.method}
    name_key = NAME_BEARING_METHODS.get(message.method)
    name = params.get(name_key) if name_key is not None else None
    if isinstance(name, str):
        headers[MCP_NAME_HEADER] = encode_header_value(name)
    return headers
