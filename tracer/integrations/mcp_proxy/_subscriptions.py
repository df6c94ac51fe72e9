"""Resource subscriptions of the HTTP clients, per client, over the upstream's one session.

All handshake-era HTTP clients share the upstream's one session, so the
upstream knows one subscription per uri whoever asked. The proxy keeps, per
uri, the set of client sessions subscribed: the first ``resources/subscribe``
goes upstream (the clients joining while it is on its way get its answer),
the later ones are answered here (an empty result, as the server answers);
``resources/unsubscribe`` goes upstream only when the last subscribed session
leaves (by unsubscribing, or its session ending with ``DELETE``), the others
are answered here. A resource update goes to the sessions subscribed to its
uri (:meth:`Subscriptions.sessions`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from mcp_types import ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCRequest, JSONRPCResponse

__all__ = ["SUBSCRIPTION_METHODS", "Subscriptions"]

SUBSCRIPTION_METHODS = frozenset({"resources/subscribe", "resources/unsubscribe"})

Reply = Callable[[JSONRPCMessage], Awaitable[None]]
# Send a request upstream; its answer (and what comes for it) goes to the reply.
Relay = Callable[[JSONRPCRequest, Reply], Awaitable[None]]


@dataclass(eq=False)
class _Uri:
    """One uri's subscribed sessions, and the first subscribe's upstream answer."""

    sessions: set[str]
    settled: anyio.Event = field(default_factory=anyio.Event)
    error: ErrorData | None = None


class Subscriptions:
    """Which client sessions are subscribed to which uri (see the module)."""

    def __init__(self) -> None:
        self._uris: dict[str, _Uri] = {}

    def sessions(self, uri: object) -> frozenset[str]:
        entry = self._uris.get(uri) if isinstance(uri, str) else None
        return frozenset(entry.sessions) if entry is not None else frozenset()

    async def request(
        self, session: str, request: JSONRPCRequest, reply: Reply, relay: Relay
    ) -> None:
        """A session's ``resources/subscribe`` or ``resources/unsubscribe``
        (``request`` carries the proxy's own id; ``reply`` gets its answer)."""
        uri = (request.params or {}).get("uri")
        if not isinstance(uri, str):
            await relay(request, reply)  # malformed: the server says what is wrong
        elif request.method == "resources/subscribe":
            await self._subscribe(session, uri, request, reply, relay)
        else:
            await self._unsubscribe(session, uri, request, reply, relay)

    def end(self, session: str) -> list[str]:
        """The session ended: the uris nobody is subscribed to any more (to
        unsubscribe upstream)."""
        left = []
        for uri, entry in list(self._uris.items()):
            entry.sessions.discard(session)
            if not entry.sessions:
                del self._uris[uri]
                left.append(uri)
        return left

    async def _subscribe(
        self, session: str, uri: str, request: JSONRPCRequest, reply: Reply, relay: Relay
    ) -> None:
        entry = self._uris.get(uri)
        if entry is not None:
            entry.sessions.add(session)
            await entry.settled.wait()
            if entry.error is not None:
                await reply(JSONRPCError(jsonrpc="2.0", id=request.id, error=entry.error))
            else:
                await reply(_empty(request))
            return
        entry = self._uris[uri] = _Uri({session})

        async def settle(message: JSONRPCMessage) -> None:
            if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id == request.id:
                if isinstance(message, JSONRPCError):
                    # Not subscribed upstream: nobody is (the joiners get this error too).
                    entry.error = message.error
                    if self._uris.get(uri) is entry:
                        del self._uris[uri]
                entry.settled.set()
            await reply(message)

        await relay(request, settle)

    async def _unsubscribe(
        self, session: str, uri: str, request: JSONRPCRequest, reply: Reply, relay: Relay
    ) -> None:
        entry = self._uris.get(uri)
        if entry is None:
            await relay(request, reply)  # nobody subscribed: the server answers as it does
            return
        entry.sessions.discard(session)
        if entry.sessions:
            await reply(_empty(request))  # others still are: the upstream stays subscribed
            return
        del self._uris[uri]
        await relay(request, reply)


def _empty(request: JSONRPCRequest) -> JSONRPCResponse:
    return JSONRPCResponse(jsonrpc="2.0", id=request.id, result={})
