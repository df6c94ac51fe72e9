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
sessions that subscribed to its ``uri`` (:class:`Sessions`; subscriptions are
kept per session, :mod:`._subscriptions`). A session's SSE streams are
resumable: their events have ids and the last ones are kept, and a ``GET``
with ``Last-Event-ID`` replays what followed that id on its stream, then goes
on live (:mod:`._replay`); ``DELETE`` ends the session. A 2026-07-28
client's ``subscriptions/listen`` is a POST whose stream stays open: the
proxy relays it, and the upstream's notifications for it, on that stream
(such a client has no session: its streams are not resumable).

DNS rebinding (the transport's security warning): a request whose ``Host`` is
not a loopback name or an allowed host, or whose ``Origin`` is not a loopback
origin or an allowed origin, gets ``403`` before anything is read.
"""

from __future__ import annotations

import itertools
import math
import secrets
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
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

from ._config import ProxyConfig
from ._proxy import CONVERSATION_META_KEY, McpProxy, Reply
from ._replay import STANDALONE, Attached, SessionLog, sse_frame
from ._subscriptions import SUBSCRIPTION_METHODS, Subscriptions

__all__ = ["LAST_EVENT_ID_HEADER", "SESSION_HEADER", "Sessions", "http_app"]

SESSION_HEADER = "mcp-session-id"
LAST_EVENT_ID_HEADER = "last-event-id"
PROTOCOL_HEADER = "mcp-protocol-version"
_PRIMING_SINCE = "2025-11-25"  # the first version whose clients take a priming event
_SERVER_ERROR = -32000
_LISTEN = "subscriptions/listen"
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "[::1]"})
_UPDATED = "notifications/resources/updated"
_SSE_HEADERS = {"Cache-Control": "no-cache"}


class Sessions:
    """The handshake-era sessions: their SSE streams (resumable, :class:`SessionLog`),
    their resource subscriptions, and where a message the upstream sends unasked goes."""

    def __init__(self, config: ProxyConfig) -> None:
        self._config = config
        self._logs: dict[str, SessionLog] = {}
        self._opened: dict[str, None] = {}  # sessions by their standalone GET, latest last
        self.subscriptions = Subscriptions()

    def log(self, session: str) -> SessionLog:
        log = self._logs.get(session)
        if log is None:
            config = self._config
            log = self._logs[session] = SessionLog(
                config.sse_replay_events, config.sse_replay_bytes, config.sse_retry_ms
            )
        return log

    def opened(self, session: str) -> None:
        """The session (re)opened its standalone stream."""
        self._opened.pop(session, None)
        self._opened[session] = None

    def end(self, session: str) -> list[str]:
        """The session ended (``DELETE``): its streams close, its events go; the
        uris it was the last subscriber of (to unsubscribe upstream)."""
        log = self._logs.pop(session, None)
        if log is not None:
            log.close()
        self._opened.pop(session, None)
        return self.subscriptions.end(session)

    def route(self, message: JSONRPCMessage) -> Reply | None:
        """Where ``message`` goes (``None``: no standalone stream wants it).

        A resource update goes to the sessions subscribed to its ``uri``; other
        notifications to every standalone stream, connected or not (a stream
        whose connection broke gets it on its resume); a request to one
        connected (the latest opened), which answers it with a POST."""
        sessions = [s for s in self._opened if self._logs[s].has(STANDALONE)]
        if isinstance(message, JSONRPCNotification) and message.method == _UPDATED:
            subscribed = self.subscriptions.sessions((message.params or {}).get("uri"))
            sessions = [s for s in sessions if s in subscribed]
        elif isinstance(message, JSONRPCRequest):
            sessions = [s for s in sessions if self._logs[s].is_live(STANDALONE)][-1:]
        if not sessions:
            return None
        logs = [self._logs[s] for s in sessions]

        async def send(message: JSONRPCMessage) -> None:
            for log in logs:
                log.record(STANDALONE, message)

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
    sessions = Sessions(proxy.config)
    proxy.standalone = sessions.route

    async def endpoint(request: Request) -> Response:
        refused = _refused(request, hosts, origins)
        if refused is not None:
            return Response(refused, status_code=403, media_type="text/plain")
        if request.method == "GET":
            return _get_stream(request, sessions, proxy)
        if request.method == "DELETE":
            return await _end_session(request, sessions, proxy, ids)
        if request.method != "POST":
            return Response(status_code=405, headers={"Allow": "GET, POST, DELETE"})
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
        elif message.method == "tools/call":
            conversation = request.headers.get(header) if header else None
            if conversation or session:
                message = _with_conversation(message, conversation or f"mcp-session-{session}")
        own_id = f"http-{next(ids)}"
        own = message.model_copy(update={"id": own_id})
        headers = {SESSION_HEADER: session} if message.method == "initialize" and session else {}
        sse = "text/event-stream" in request.headers.get("accept", "")
        if sse and session and message.method != _LISTEN:
            # A session's stream is resumable: its events have ids and are kept.
            log = sessions.log(session)
            attached = log.open(own_id, prime=_primes(request, proxy, message))
            reply: Reply = _recorder(log, own_id, message.id)
            await _handle(proxy, sessions, session, own, reply)
            return StreamingResponse(
                _resumable(attached),
                media_type="text/event-stream",
                headers={**_SSE_HEADERS, **headers},
            )
        # Unbounded: the proxy never waits on a slow (or gone) HTTP client.
        send, received = anyio.create_memory_object_stream[JSONRPCMessage](math.inf)
        await _handle(proxy, sessions, session, own, send.send)
        if sse:
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


async def _handle(
    proxy: McpProxy, sessions: Sessions, session: str | None, own: JSONRPCRequest, reply: Reply
) -> None:
    """A client's request (with the proxy's own id) to the proxy; a session's
    subscriptions are kept per session (the upstream's one is shared)."""
    if session and own.method in SUBSCRIPTION_METHODS:
        await sessions.subscriptions.request(session, own, reply, proxy.handle)
    else:
        await proxy.handle(own, reply)


def _recorder(log: SessionLog, own_id: str, client_id: RequestId) -> Reply:
    """What the proxy sends for one POST, onto its stream in the session's log."""

    async def reply(message: JSONRPCMessage) -> None:
        last = _is_answer(message, own_id)
        log.record(own_id, _to_client(message, own_id, client_id), last=last)

    return reply


async def _resumable(attached: Attached) -> AsyncIterator[bytes]:
    """One connection to a session's stream: the priming event or the replay, then
    live. A connection that breaks leaves the stream going: it is kept for a resume."""
    try:
        for frame in attached.first:
            yield frame
        if attached.live is not None:
            async for frame in attached.live:
                yield frame
    finally:
        attached.detach()


def _primes(request: Request, proxy: McpProxy, message: JSONRPCRequest | None = None) -> bool:
    """Only a client of 2025-11-25 or later expects an event with no data (the
    priming event); an older one may fail to parse it. The client's version: its
    ``initialize``'s, else its header's, else the one the handshake settled on."""
    version: Any = None
    if message is not None and message.method == "initialize":
        version = (message.params or {}).get("protocolVersion")
    version = version or request.headers.get(PROTOCOL_HEADER) or proxy.protocol_version
    return isinstance(version, str) and version >= _PRIMING_SINCE


def _get_stream(request: Request, sessions: Sessions, proxy: McpProxy) -> Response:
    """A handshake-era client's ``GET``: its session's standalone stream of what the
    upstream sends outside its requests, or, with ``Last-Event-ID``, the resume
    of the stream that id was on (a 2026-07-28 client listens with a POST)."""
    if "text/event-stream" not in request.headers.get("accept", ""):
        return Response("GET opens an SSE stream", status_code=406, media_type="text/plain")
    session = request.headers.get(SESSION_HEADER)
    if not session:
        return Response("GET needs an Mcp-Session-Id", status_code=400, media_type="text/plain")
    log = sessions.log(session)
    last_event_id = request.headers.get(LAST_EVENT_ID_HEADER)
    if last_event_id:
        attached = log.resume(last_event_id)
        if attached is None:
            # As the TypeScript SDK's server answers an id it cannot resume from.
            message = f"Last-Event-ID {last_event_id!r} is unknown here or expired"
            error = ErrorData(code=_SERVER_ERROR, message=message)
            return _json(JSONRPCError(jsonrpc="2.0", id=None, error=error), 400)
    elif log.is_live(STANDALONE):
        return Response("the session's stream is open already", status_code=409)
    else:
        attached = log.open(STANDALONE, prime=_primes(request, proxy))
    sessions.opened(session)
    return StreamingResponse(
        _resumable(attached), media_type="text/event-stream", headers=_SSE_HEADERS
    )


async def _end_session(
    request: Request, sessions: Sessions, proxy: McpProxy, ids: Iterator[int]
) -> Response:
    """``DELETE``: the client ends its session; the subscriptions it was the last
    one holding are ended upstream."""
    session = request.headers.get(SESSION_HEADER)
    if not session:
        return Response("DELETE needs an Mcp-Session-Id", status_code=400, media_type="text/plain")
    for uri in sessions.end(session):
        unsubscribe = JSONRPCRequest(
            jsonrpc="2.0",
            id=f"http-{next(ids)}",
            method="resources/unsubscribe",
            params={"uri": uri},
        )
        await proxy.handle(unsubscribe, _nowhere)
    return Response(status_code=200)


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
            last = _is_answer(message, own_id)
            answered = answered or last
            yield sse_frame(_to_client(message, own_id, client_id))
            if last:
                return
    finally:
        if not answered:
            with anyio.CancelScope(shield=True):
                await proxy.handle(_cancelled(own_id), _nowhere)


def _to_client(message: JSONRPCMessage, own_id: str, client_id: RequestId) -> JSONRPCMessage:
    """What the proxy sends for a request, as its client sees it: the answer
    under the client's id, and a listen stream's frames naming the client's id
    in ``_meta`` (not the proxy's own)."""
    if _is_answer(message, own_id):
        message = message.model_copy(update={"id": client_id})
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
