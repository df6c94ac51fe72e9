"""OTLP/gRPC memory under many streams (issue 41): grpc's core reads a stream's
whole body before the event loop takes its call, so what bounds the bodies the
process holds is the streams a connection may have open. The server advertises
the limit (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS) and counts HTTP/2's open
streams against it, so a client past the limit queues its calls on its side:
none is refused, and the receiver never holds more calls than the limit."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator

import grpc
from hypothesis import given, settings
from hypothesis import strategies as st

from toolspan.serve import Server

from .conftest import wait_for
from .test_grpc_bound import METHOD, _protobuf
from .test_grpc_concurrency import _stored_span_ids

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_SETTINGS, _ACK = 0x4, 0x1
_MAX_CONCURRENT_STREAMS = 0x3


def _settings_frame(entries: dict[int, int], flags: int = 0) -> bytes:
    payload = b"".join(struct.pack(">HI", key, value) for key, value in entries.items())
    return struct.pack(">I", len(payload))[1:] + bytes([_SETTINGS, flags]) + b"\0\0\0\0" + payload


def _parse_settings(payload: bytes) -> dict[int, int]:
    entries = (struct.unpack(">HI", payload[i : i + 6]) for i in range(0, len(payload), 6))
    return dict(entries)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise AssertionError("the server closed the connection")
        data += chunk
    return data


def _advertised(port: int) -> dict[int, int]:
    """The server's first SETTINGS frame, read off the wire by a bare HTTP/2
    client (the grpc client would honour it, not show it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_PREFACE + _settings_frame({}))
        while True:
            header = _read_exactly(sock, 9)
            length = int.from_bytes(header[:3], "big")
            kind, flags = header[3], header[4]
            payload = _read_exactly(sock, length)
            if kind == _SETTINGS and not flags & _ACK:
                return _parse_settings(payload)


@settings(max_examples=20, deadline=None)
@given(entries=st.dictionaries(st.integers(1, 0xFFFF), st.integers(0, 2**32 - 1), max_size=8))
def test_the_bare_settings_codec_reads_back_what_it_writes(entries: dict[int, int]) -> None:
    frame = _settings_frame(entries)
    assert int.from_bytes(frame[:3], "big") == len(frame) - 9 == 6 * len(entries)
    assert _parse_settings(frame[9:]) == entries


def test_the_server_advertises_its_stream_limit_per_connection(serve) -> None:
    default = serve()
    assert _advertised(default.settings.grpc_port)[_MAX_CONCURRENT_STREAMS] == 16
    lowered = serve(directory=default.settings.directory.parent / "lowered", max_grpc_streams=3)
    assert _advertised(lowered.settings.grpc_port)[_MAX_CONCURRENT_STREAMS] == 3


def _held(release: threading.Event, body: bytes) -> Iterator[bytes]:
    release.wait(30)  # the call is open on the server, its body not sent yet
    yield body


def test_past_the_stream_limit_calls_wait_on_the_client_and_none_is_refused(serve) -> None:
    """4 calls hold the 4 streams of the connection open; 12 more sent then
    wait on the client (none reaches the receiver, none is refused) until the
    4 are answered; then all 16 are acknowledged and spooled. Without the
    limit the 12 reach the receiver at once (peak_calls 16)."""
    limit = 4
    server: Server = serve(max_grpc_streams=limit)
    assert server.grpc is not None
    admission = server.grpc.admission
    release = threading.Event()
    with grpc.insecure_channel(f"127.0.0.1:{server.settings.grpc_port}") as channel:
        raw = channel.unary_unary(METHOD, request_serializer=bytes, response_deserializer=bytes)
        streaming = channel.stream_unary(
            METHOD, request_serializer=bytes, response_deserializer=bytes
        )
        held = [
            streaming.future(_held(release, _protobuf(trace, 3)), timeout=60)
            for trace in range(1, limit + 1)
        ]
        wait_for(lambda: admission.calls == limit)
        waiting = [raw.future(_protobuf(trace, 3), timeout=60) for trace in range(10, 22)]
        # Without the limit these tiny calls are answered well within this.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not any(call.done() for call in waiting):
            time.sleep(0.05)
        assert not any(call.done() for call in waiting)
        assert admission.peak_calls == limit
        release.set()
        codes = [call.code() for call in held + waiting]
    assert codes == [grpc.StatusCode.OK] * (limit + 12)
    assert admission.peak_calls == limit and server.grpc.refused == 0
    assert len(_stored_span_ids(server)) == 3 * (limit + 12)
