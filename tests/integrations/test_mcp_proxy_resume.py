"""Issue 41: an HTTP client whose SSE stream broke resumes it (``GET`` + ``Last-Event-ID``)
through `--serve http`, with the real `mcp` SDK client's resumption; and the bounded
replay log behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import mcp_types
import pytest
from anyio.abc import SocketStream, TaskGroup
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.shared.message import ClientMessageMetadata

from toolspan.tracer.integrations.mcp_proxy import McpProxy, http_app, parse_config
from toolspan.tracer.integrations.mcp_proxy._replay import SessionLog

from .mcp_proxy_server import Shop, shop_server
from .test_mcp_proxy import free_port, uvicorn_serving

WAIT_S = 10.0  # a bound on what is on its way (never reached when it works)
ANSWER = "through the gate"


class Cutter:
    """A TCP relay in front of the proxy that can break every connection at once
    (a network failure, as the client sees it) and counts what reached the client."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.to_client = bytearray()
        self._open: list[tuple[SocketStream, SocketStream]] = []

    async def serve(self, group: TaskGroup) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
        group.start_soon(listener.serve, self._relay)

    async def cut(self) -> None:
        for client, server in self._open:
            await client.aclose()
            await server.aclose()
        self._open.clear()

    async def _relay(self, client: SocketStream) -> None:
        server = await anyio.connect_tcp("127.0.0.1", self.target_port)
        self._open.append((client, server))
        async with anyio.create_task_group() as group:
            group.start_soon(self._pump, server, client, True)
            await self._pump(client, server, False)
            group.cancel_scope.cancel()

    async def _pump(self, source: SocketStream, sink: SocketStream, to_client: bool) -> None:
        with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                data = await source.receive()
                if to_client:
                    self.to_client.extend(data)
                await sink.send(data)


@asynccontextmanager
async def cut_able_proxy(shop: Shop, spans: Any) -> AsyncIterator[tuple[str, Cutter]]:
    """The proxy on HTTP (its streams ask for a 10 ms reconnection delay) in front of
    the shop in memory, behind a :class:`Cutter`; the URL through the cutter."""
    config = parse_config({"timeout_s": 5, "sse_retry_ms": 10})
    proxy = McpProxy(
        lambda: InMemoryTransport(shop_server(shop)), config, tracer_provider=spans.provider
    )
    async with uvicorn_serving(http_app(proxy)) as url, anyio.create_task_group() as group:
        cutter = Cutter(int(url.rsplit(":", 1)[1].split("/")[0]))
        await cutter.serve(group)
        yield f"http://127.0.0.1:{cutter.port}/mcp", cutter
        group.cancel_scope.cancel()


async def _call_broken_mid_way(url: str, cutter: Cutter, shop: Shop) -> tuple[Any, list[str]]:
    tokens: list[str] = []
    progressed = anyio.Event()

    async def token(value: str) -> None:
        tokens.append(value)

    async def progress(_progress: float, _total: float | None, _message: str | None) -> None:
        progressed.set()

    async with Client(url, mode="legacy") as client:
        request = mcp_types.CallToolRequest(
            params=mcp_types.CallToolRequestParams(name="wait_for_gate", arguments={})
        )
        metadata = ClientMessageMetadata(on_resumption_token_update=token)
        async with anyio.create_task_group() as group:
            answer: list[Any] = []

            async def call() -> None:
                answer.append(
                    await client.session.send_request(
                        request, mcp_types.CallToolResult, None, metadata, progress
                    )
                )

            group.start_soon(call)
            with anyio.fail_after(WAIT_S):
                await progressed.wait()  # mid-call: the tool waits for the gate
                await cutter.cut()  # the POST's stream breaks before the answer
                assert shop.gate is not None
                shop.gate.set()  # answered while the client is away
        return answer[0], tokens


@pytest.mark.slow
def test_a_client_whose_stream_broke_mid_call_resumes_and_gets_the_answer_once(spans):
    shop = Shop()

    async def test() -> Any:
        shop.gate = anyio.Event()
        async with cut_able_proxy(shop, spans) as (url, cutter):
            answer, tokens = await _call_broken_mid_way(url, cutter, shop)
            return answer, tokens, bytes(cutter.to_client)

    # Before: the stream's events had no ids, so the SDK client could not resume:
    # the call ended with "SSE stream ended without a response".
    answer, tokens, seen = anyio.run(test)
    assert answer.content[0].text == ANSWER
    assert shop.calls["wait_for_gate"] == 1  # the call ran once upstream
    # The answer reached the client once (one event carrying its text content).
    assert seen.count(b'"text":"%s"' % ANSWER.encode()) == 1
    # The priming event, the progress, then the answer on the resumed stream.
    stream = tokens[0].rpartition("-")[0]
    assert tokens == [f"{stream}-0", f"{stream}-1", f"{stream}-2"]


# -- the replay log ------------------------------------------------------------------------


def _frame(log: SessionLog, stream: str, number: int) -> bytes:
    message = mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"n": number}
    )
    log.record(stream, message)
    return b'"n":%d}' % number


@settings(max_examples=60, deadline=None)
@given(
    sends=st.lists(st.sampled_from(["get", "http-1", "http-2"]), max_size=30),
    max_events=st.integers(1, 8),
    max_bytes=st.integers(1, 600),
    after=st.integers(0, 30),
)
def test_a_resume_replays_exactly_what_followed_its_id_or_nothing(
    sends, max_events, max_bytes, after
):
    log = SessionLog(max_events, max_bytes)
    sent: dict[str, list[bytes]] = {}
    for number, stream in enumerate(sends):
        sent.setdefault(stream, []).append(_frame(log, stream, number))
        events, kept_bytes = log.kept
        assert events <= max_events
        assert events == 1 or kept_bytes <= max_bytes  # the newest is kept whatever its size
    kept = sends[len(sends) - log.kept[0] :]  # the log drops its oldest first
    for stream, frames in sent.items():
        resumed = log.resume(f"{stream}-{after}")
        if after > len(frames):
            assert resumed is None  # an id this stream never had
            continue
        # Resumable if every event of the stream after the id is still kept;
        # else nothing is replayed (never a replay with a hole in it).
        assert (resumed is not None) == (kept.count(stream) >= len(frames) - after)
        if resumed is None:
            continue
        # The events after the id, this stream's only, in order, each once.
        assert len(resumed.first) == len(frames) - after
        for frame, expected in zip(resumed.first, frames[after:], strict=True):
            assert expected in frame and frame.startswith(b"id: %s-" % stream.encode())
        resumed.detach()
    # The newest event can always be resumed to from the one before it.
    if sends:
        last = sends[-1]
        assert log.resume(f"{last}-{len(sent[last]) - 1}") is not None
