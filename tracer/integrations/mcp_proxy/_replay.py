"""Resumable SSE streams of the HTTP serving (streamable HTTP "resumability").

Every event a handshake-era session's SSE stream carries gets an id,
``<stream>-<seq>``: the stream is the proxy's own id of the POST it answers
(``http-7``) or ``get`` for the session's standalone stream, and ``seq``
counts that stream's events from 1, so ids are unique within the session. A
stream's first bytes are a priming event (an id, no data: the client has an
id to resume from before anything was sent).

A session keeps the last events sent on its streams, bounded by a number of
events and of bytes (the newest event is kept whatever its size: a large
answer can still be resumed). A client whose stream broke sends ``GET`` with
``Last-Event-ID``: the events of that stream after that id are replayed, then
the stream goes on live (a POST's stream ends with its answer). An id the
session never gave, or whose following events were evicted already, is
refused: nothing is replayed rather than a stream with a hole in it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp_types import JSONRPCMessage

__all__ = [
    "DEFAULT_REPLAY_BYTES",
    "DEFAULT_REPLAY_EVENTS",
    "STANDALONE",
    "Attached",
    "SessionLog",
    "sse_frame",
]

DEFAULT_REPLAY_EVENTS = 256
DEFAULT_REPLAY_BYTES = 1 << 20
STANDALONE = "get"  # the stream name of a session's standalone (GET) stream


def sse_frame(message: JSONRPCMessage, event_id: str | None = None) -> bytes:
    """One SSE ``message`` event carrying ``message`` (with ``id`` when given)."""
    body = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
    head = b"" if event_id is None else b"id: %s\n" % event_id.encode()
    return head + b"event: message\ndata: " + body + b"\n\n"


@dataclass(eq=False)
class _Stream:
    """One SSE stream of a session: its count of events and its live connection."""

    name: str
    seq: int = 0
    live: MemoryObjectSendStream[bytes] | None = None
    done: bool = False  # its last event (a POST's answer) was recorded
    kept: int = 0  # its events still in the log
    evicted: int = 0  # the highest seq of it no longer kept


@dataclass(frozen=True, slots=True)
class _Event:
    stream: _Stream
    seq: int
    frame: bytes


@dataclass(frozen=True, slots=True)
class Attached:
    """A connection to a stream: what to send first (the priming event or the
    replay), then ``live`` until the stream ends (``None``: it ended already)."""

    first: list[bytes]
    live: MemoryObjectReceiveStream[bytes] | None
    detach: Callable[[], None]


class SessionLog:
    """One session's SSE streams and the last events sent on them."""

    def __init__(
        self,
        max_events: int = DEFAULT_REPLAY_EVENTS,
        max_bytes: int = DEFAULT_REPLAY_BYTES,
        retry_ms: int | None = None,
    ) -> None:
        self._max_events = max_events
        self._max_bytes = max_bytes
        self._retry_ms = retry_ms
        self._streams: dict[str, _Stream] = {}
        self._events: deque[_Event] = deque()
        self._bytes = 0

    @property
    def kept(self) -> tuple[int, int]:
        """How many events, and how many bytes of them, are kept now."""
        return len(self._events), self._bytes

    def has(self, name: str) -> bool:
        return name in self._streams

    def is_live(self, name: str) -> bool:
        stream = self._streams.get(name)
        return stream is not None and stream.live is not None

    def record(self, name: str, message: JSONRPCMessage, *, last: bool = False) -> None:
        """Send ``message`` on stream ``name`` (kept for a replay; live if connected).
        ``last``: the stream ends with it."""
        stream = self._streams.setdefault(name, _Stream(name))
        if stream.done:
            return  # a POST's stream carries nothing after its answer
        stream.seq += 1
        frame = sse_frame(message, f"{name}-{stream.seq}")
        self._keep(_Event(stream, stream.seq, frame))
        if stream.live is not None:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                stream.live.send_nowait(frame)
        if last:
            stream.done = True
            self._disconnect(stream)

    def open(self, name: str, *, prime: bool) -> Attached:
        """A new connection to stream ``name`` from its next event on (an earlier
        connection to it is closed: the client has left it)."""
        stream = self._streams.setdefault(name, _Stream(name))
        first = [self._priming(stream)] if prime else []
        return self._attach(stream, first)

    def resume(self, event_id: str) -> Attached | None:
        """The connection of a client resuming after ``event_id``: the events of its
        stream after it, then live (``None``: an id unknown here, or expired)."""
        name, _, number = event_id.rpartition("-")
        stream = self._streams.get(name)
        if stream is None or not number.isdigit():
            return None
        seq = int(number)
        if seq > stream.seq or seq < stream.evicted:
            return None
        replay = [e.frame for e in self._events if e.stream is stream and e.seq > seq]
        return self._attach(stream, replay)

    def close(self) -> None:
        """The session ended: its connections end, its events go."""
        for stream in self._streams.values():
            self._disconnect(stream)
        self._streams.clear()
        self._events.clear()
        self._bytes = 0

    def _attach(self, stream: _Stream, first: list[bytes]) -> Attached:
        self._disconnect(stream)
        if stream.done:
            return Attached(first, None, lambda: None)
        # Unbounded: the proxy never waits on a slow (or gone) HTTP client.
        send, received = anyio.create_memory_object_stream[bytes](math.inf)
        stream.live = send

        def detach() -> None:
            if stream.live is send:
                stream.live = None
                self._forget_if_spent(stream)

        return Attached(first, received, detach)

    def _disconnect(self, stream: _Stream) -> None:
        if stream.live is not None:
            stream.live.close()
            stream.live = None

    def _priming(self, stream: _Stream) -> bytes:
        retry = b"" if self._retry_ms is None else b"retry: %d\n" % self._retry_ms
        return b"id: %s-%d\n%sdata: \n\n" % (stream.name.encode(), stream.seq, retry)

    def _keep(self, event: _Event) -> None:
        self._events.append(event)
        event.stream.kept += 1
        self._bytes += len(event.frame)
        # The newest event stays whatever its size: its stream can still be resumed.
        while len(self._events) > 1 and (
            len(self._events) > self._max_events or self._bytes > self._max_bytes
        ):
            old = self._events.popleft()
            self._bytes -= len(old.frame)
            old.stream.kept -= 1
            old.stream.evicted = old.seq
            self._forget_if_spent(old.stream)

    def _forget_if_spent(self, stream: _Stream) -> None:
        """A finished stream with nothing left to replay and no connection is forgotten
        (a resume naming it is then refused, as it would be with its events gone)."""
        if stream.done and stream.kept == 0 and stream.live is None:
            self._streams.pop(stream.name, None)
