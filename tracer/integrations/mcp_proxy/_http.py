"""Serving clients over streamable HTTP: one POST, one JSON-RPC message, one JSON answer.

Each POST's request gets an id of the proxy's own (clients on separate
connections may all use id 1) and its answer gets the client's id back. Every
handshake-era client gets an ``Mcp-Session-Id`` of its own with its
``initialize`` answer (the upstream is initialized once, by the first client:
the proxy answers the others). A ``tools/call``'s conversation comes from
``_meta``, else the config's header, else the client's session.

A request is answered with an SSE stream when the client accepts one (what
the upstream sends mid-request, progress, log messages, its own sampling or
elicitation requests, then the response), else with ``application/json``
(the response alone). The client answers the upstream's requests with POSTs, passed up
as they are.

A handshake-era client's ``GET`` (``Accept: text/event-stream``, its session
id) opens its standalone SSE stream: what the upstream sends while no call
runs reaches it there, and the change notifications (list changes, resource
updates) do even mid-call, ``notifications/resources/updated`` only to the
sessions that subscribed to its ``uri`` (:class:`Standalone`). A 2026-07-28
client's ``subscriptions/listen`` is a POST whose stream stays open: the
proxy relays it, and the upstream's notifications for it, on that stream.

DNS rebinding (the transport's security warning): a request whose ``Host`` is
not a loopback name or an allowed host, or whose ``Origin`` is not a loopback
origin or an allowed origin, gets ``403`` before anything is read.
"""

from __future__ import annotations

import itertools
import math
import secrets
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ._proxy import CONVERSATION_META_KEY, McpProxy, Reply

__all__ = ["SESSION_HEADER", "Standalone", "http_app"]

SESSION_HEADER = "mcp-session-id"
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})
_UPDATED = "notifications/resources/updated"
_SSE_HEADERS = {"Cache-Control": "no-cache"}


class Standalone:
    """The open standalone streams (one per session), and each session's resource
    subscriptions: where a message the upstream sends unasked goes."""

    def __init__(self) -> None:
        self._streams: dict[str, MemoryObjectSendStream[JSONRPCMessage]] = {}
        self._subscribed: dict[str, set[str]] = {}  # session -> uris

    def open(self, session: str) -> MemoryObjectReceiveStream[JSONRPCMessage] | None:
        """The session's stream (``None``: it has one open already, as the SDK's servers say)."""
        if session in self._streams:
            return None
        # Unbounded: the proxy never waits on a slow (or gone) HTTP client.
        send, received = anyio.create_memory_object_stream[JSONRPCMessage](math.inf)
        self._streams[session] = send
        return received

    def close(self, session: str) -> None:
        stream = self._streams.pop(session, None)
        if stream is not None:
            stream.close()

    def note(self, session: str | None, message: JSONRPCRequest) -> None:
        """A session's ``resources/subscribe`` or ``resources/unsubscribe`` (relayed as it is)."""
        uri = (message.params or {}).get("uri")
        if session is None or not isinstance(uri, str):
            return
        uris = self._subscribed.setdefault(session, set())
        if message.method == "resources/subscribe":
            uris.add(uri)
        elif message.method == "resources/unsubscribe":
            uris.discard(uri)

    def route(self, message: JSONRPCMessage) -> Reply | None:
        """Where ``message`` goes (``None``: no open stream wants it).

        A resource update goes to the sessions that subscribed to its ``uri``;
        other notifications to every open stream; a request to one (the latest
        opened), which answers it with a POST."""
        sessions = list(self._streams)
        if isinstance(message, JSONRPCNotification) and message.method == _UPDATED:
            uri = (message.params or {}).get("uri")
            sessions = [s for s in sessions if uri in self._subscribed.get(s, ())]
        elif isinstance(message, JSONRPCRequest):
            sessions = sessions[-1:]
        if not sessions:
            return None
        streams = [self._streams[s] for s in sessions]

        async def send(message: JSONRPCMessage) -> None:
            for stream in streams:
                with suppress(anyio.ClosedResourceError):
                    stream.send_nowait(message)

        return send


def http_app(
    proxy: McpProxy,
    *,
    path: str = "/mcp",
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> Starlette:
    """An ASGI app serving ``proxy`` at ``path`` (run it with uvicorn).

    ``allowed_hosts`` (``name`` or ``name:port``) and ``allowed_origins``
    (``scheme://name[:port]``) are accepted besides the loopback ones."""
    ids = itertools.count(1)
    header = proxy.config.conversation_header
    hosts = frozenset(h.lower() for h in allowed_hosts)
    origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)
    standalone = Standalone()
    proxy.standalone = standalone.route

    async def endpoint(request: Request) -> Response:
        refused = _refused(request, hosts, origins)
        if refused is not None:
            return Response(refused, status_code=403, media_type="text/plain")
        if request.method == "GET":
            return _standalone_stream(request, standalone)
        if request.method != "POST":
            return Response(status_code=405, headers={"Allow": "GET, POST"})
        try:
            message = jsonrpc_message_adapter.validate_json(await request.body(), by_name=False)
        except ValidationError as exc:
            error = ErrorData(code=PARSE_ERROR, message=f"not a JSON-RPC message: {exc.title}")
            return _json(JSONRPCError(jsonrpc="2.0", id=None, error=error), 400)
        if not isinstance(message, JSONRPCRequest):
            await proxy.handle(message, _nowhere)
            return Response(status_code=202)
        session = request.headers.get(SESSION_HEADER)
        if message.method == "initialize":
            session = secrets.token_hex(16)  # this client's, for its later requests
        elif message.method in ("resources/subscribe", "resources/unsubscribe"):
            standalone.note(session, message)
        elif message.method == "tools/call":
            conversation = request.headers.get(header) if header else None
            if conversation or session:
                message = _with_conversation(message, conversation or f"mcp-session-{session}")
        # Unbounded: the proxy never waits on a slow (or gone) HTTP client.
        send, received = anyio.create_memory_object_stream[JSONRPCMessage](math.inf)
        own_id = f"http-{next(ids)}"
        await proxy.handle(message.model_copy(update={"id": own_id}), send.send)
        headers = {SESSION_HEADER: session} if message.method == "initialize" and session else {}
        if "text/event-stream" in request.headers.get("accept", ""):
            # As the SDK's servers answer by default: a stream per POST, so what
            # the upstream sends mid-request reaches the client before the answer.
            return StreamingResponse(
                _events(proxy, received, own_id, message),
                media_type="text/event-stream",
                headers={**_SSE_HEADERS, **headers},
            )
        answer = await _answer_of(received, own_id)
        response = _json(answer.model_copy(update={"id": message.id}), 200)
        response.headers.update(headers)
        return response

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with proxy.running():
            yield

    return Starlette(
        routes=[Route(path, endpoint, methods=["GET", "POST", "DELETE"])], lifespan=lifespan
    )


def _standalone_stream(request: Request, standalone: Standalone) -> Response:
    """A handshake-era client's ``GET``: its session's stream of what the upstream
    sends outside its requests (a 2026-07-28 client listens with a POST instead)."""
    if "text/event-stream" not in request.headers.get("accept", ""):
        return Response("GET opens an SSE stream", status_code=406, media_type="text/plain")
    session = request.headers.get(SESSION_HEADER)
    if not session:
        return Response("GET needs an Mcp-Session-Id", status_code=400, media_type="text/plain")
    received = standalone.open(session)
    if received is None:
        return Response("the session's stream is open already", status_code=409)

    async def events() -> AsyncIterator[bytes]:
        try:
            async for message in received:
                yield _event(message)
        finally:
            standalone.close(session)

    return StreamingResponse(events(), media_type="text/event-stream", headers=_SSE_HEADERS)


def _is_answer(message: JSONRPCMessage, own_id: str) -> bool:
    return isinstance(message, JSONRPCResponse | JSONRPCError) and message.id == own_id


async def _answer_of(received: Any, own_id: str) -> JSONRPCMessage:
    """This POST's answer: a client that takes JSON only gets no mid-request messages."""
    while True:
        message: JSONRPCMessage = await received.receive()
        if _is_answer(message, own_id):
            return message


async def _events(
    proxy: McpProxy, received: Any, own_id: str, request: JSONRPCRequest
) -> AsyncIterator[bytes]:
    """The SSE stream of one POST: mid-request messages, then its answer. A client
    gone before the end of its ``subscriptions/listen`` left it: it is cancelled
    (another request goes on, as a disconnection is no cancellation)."""
    client_id = request.id
    answered = request.method != "subscriptions/listen"
    try:
        while True:
            message: JSONRPCMessage = await received.receive()
            if _is_answer(message, own_id):
                answered = True
                yield _event(
                    _own_id_back(message.model_copy(update={"id": client_id}), own_id, client_id)
                )
                return
            yield _event(_own_id_back(message, own_id, client_id))
    finally:
        if not answered:
            with anyio.CancelScope(shield=True):
                await proxy.handle(_cancelled(own_id), _nowhere)


def _own_id_back(message: JSONRPCMessage, own_id: str, client_id: RequestId) -> JSONRPCMessage:
    """A listen stream's frames name its request's id in ``_meta``: the client's
    id, not the proxy's own."""
    field = "result" if isinstance(message, JSONRPCResponse) else "params"
    body = getattr(message, field, None)
    meta = body.get("_meta") if isinstance(body, dict) else None
    if not (isinstance(meta, dict) and meta.get(SUBSCRIPTION_ID_META_KEY) == own_id):
        return message
    assert isinstance(body, dict)
    update = {**body, "_meta": {**meta, SUBSCRIPTION_ID_META_KEY: client_id}}
    return message.model_copy(update={field: update})


def _cancelled(request_id: str) -> JSONRPCNotification:
    params = {"requestId": request_id, "reason": "the HTTP client closed the stream"}
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params=params)


def _event(message: JSONRPCMessage) -> bytes:
    body = message.model_dump_json(by_alias=True, exclude_unset=True)
    return b"event: message\ndata: " + body.encode() + b"\n\n"


def _refused(request: Request, hosts: frozenset[str], origins: frozenset[str]) -> str | None:
    """Why a request's ``Host`` or ``Origin`` is refused (``None``: accepted)."""
    host = request.headers.get("host", "").lower()
    if not (_name(host) in _LOOPBACK or host in hosts or _name(host) in hosts):
        return f"Host {host!r} is not allowed (DNS rebinding protection)"
    origin = request.headers.get("origin")
    if origin is None:
        return None
    origin = origin.lower().rstrip("/")
    scheme, _, rest = origin.partition("://")
    if origin in origins or (scheme in ("http", "https") and _name(rest) in _LOOPBACK):
        return None
    return f"Origin {origin!r} is not allowed (DNS rebinding protection)"


def _name(host: str) -> str:
    """``host`` without its port (``[::1]:8100`` -> ``[::1]``)."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.partition(":")[0]


def _with_conversation(message: JSONRPCRequest, conversation: str) -> JSONRPCRequest:
    params = dict(message.params or {})
    meta = dict(params.get("_meta") or {})
    meta.setdefault(CONVERSATION_META_KEY, conversation)
    params["_meta"] = meta
    return message.model_copy(update={"params": params})


def _json(message: Any, status: int) -> Response:
    body = message.model_dump_json(by_alias=True, exclude_unset=True)
    return Response(body, status_code=status, media_type="application/json")


async def _nowhere(_message: JSONRPCMessage) -> None:
    """Notifications and responses from an HTTP client get no answer."""
