"""A real OTLP trace receiver for end-to-end tests.

It speaks the wire protocols a collector (or an SDK exporter) uses:

* OTLP/gRPC: a ``grpc`` server implementing opentelemetry-proto's
  ``TraceService`` (gzip-compressed requests are accepted, as collectors
  send them by default);
* OTLP/HTTP: ``POST /v1/traces`` with a protobuf body (optionally gzip).

Every ``ExportTraceServiceRequest`` is decoded with the official protobuf
classes and kept, together with the bytes that came over the wire, so tests
can check both the decoded spans and that nothing secret arrived at all.

``delay_s`` makes every export answer late (a slow collector); waiting is
interruptible so :meth:`OtlpReceiver.stop` never hangs on it.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import grpc  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
    TraceServiceServicer,
    add_TraceServiceServicer_to_server,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from .services import LOOPBACK, Running, free_port, wait_for_port

__all__ = [
    "OtlpReceiver",
    "ReceivedSpan",
    "Running",
    "decode_attributes",
    "free_port",
    "wait_for_port",
]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived, with where it came from."""

    span: Span
    scope_name: str
    resource: dict[str, tuple[str, Any]]
    transport: str  # "grpc" or "http"

    @property
    def attributes(self) -> dict[str, tuple[str, Any]]:
        return decode_attributes(self.span.attributes)


def decode_attributes(pairs: Any) -> dict[str, tuple[str, Any]]:
    """``{key: (wire type, value)}``; wire type is the ``AnyValue`` field set.

    Keeping the wire type lets tests check that an int stayed an int
    (``int_value``) and a double a double (``double_value``).
    """
    decoded: dict[str, tuple[str, Any]] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        decoded[pair.key] = _any_value(pair.value)
    return decoded


def _any_value(value: AnyValue) -> tuple[str, Any]:
    kind = value.WhichOneof("value")
    if kind is None:
        return ("empty", None)
    if kind == "array_value":
        return (kind, [_any_value(item)[1] for item in value.array_value.values])
    return (kind, getattr(value, kind))


class _Store:
    """Thread-safe list of what arrived; both transports write here."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.released = threading.Event()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self.requests: list[tuple[str, ExportTraceServiceRequest]] = []
        self.raw: list[bytes] = []

    def accept(self, transport: str, body: bytes) -> ExportTraceServiceRequest:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self._arrived:
            self.requests.append((transport, request))
            self.raw.append(body)
            self._arrived.notify_all()
        if self.delay_s:
            # A slow collector: answer late, but let stop() cut the wait short.
            self.released.wait(self.delay_s)
        return request

    def wait_for_spans(self, count: int, timeout_s: float) -> tuple[bool, int]:
        """Whether ``count`` spans arrived within ``timeout_s``, and how many did."""

        def enough() -> bool:  # runs with the lock held
            return self._span_count() >= count

        with self._arrived:
            arrived = self._arrived.wait_for(enough, timeout=timeout_s)
            return arrived, self._span_count()

    def _span_count(self) -> int:
        return sum(_count(request) for _, request in self.requests)


def _count(request: ExportTraceServiceRequest) -> int:
    return sum(
        len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans
    )


class _Servicer(TraceServiceServicer):
    def __init__(self, store: _Store) -> None:
        self._store = store

    def Export(
        self, request: ExportTraceServiceRequest, context: Any
    ) -> ExportTraceServiceResponse:
        self._store.accept("grpc", request.SerializeToString())
        return ExportTraceServiceResponse()


def _http_handler(store: _Store) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            store.accept("http", body)
            answer = ExportTraceServiceResponse().SerializeToString()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the exporter gave up waiting (a slow-collector test): expected

        def log_message(self, format: str, *args: Any) -> None:
            return  # keep test output clean

    return Handler


class OtlpReceiver(Running):
    """OTLP/gRPC and OTLP/HTTP trace receiver on free loopback ports.

    >>> with OtlpReceiver() as receiver:
    ...     export_to(receiver.grpc_endpoint)
    ...     spans = receiver.wait_for_spans(2)
    """

    def __init__(self, *, delay_s: float = 0.0, http: bool = True) -> None:
        self._store = _Store(delay_s)
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        add_TraceServiceServicer_to_server(_Servicer(self._store), self._grpc)  # type: ignore[no-untyped-call]
        self.grpc_port = self._grpc.add_insecure_port(f"{LOOPBACK}:0")
        self._http: ThreadingHTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        if http:
            self._http = ThreadingHTTPServer((LOOPBACK, 0), _http_handler(self._store))
            self._http.daemon_threads = True

    @property
    def grpc_endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        """Base URL; the traces path is ``/v1/traces``."""
        if self._http is None:
            raise RuntimeError("this receiver was built with http=False")
        return f"http://{LOOPBACK}:{self._http.server_address[1]}"

    def start(self) -> Self:
        self._grpc.start()
        if self._http is not None:
            self._http_thread = threading.Thread(
                target=self._http.serve_forever, name="otlp-http-receiver", daemon=True
            )
            self._http_thread.start()
        return self

    def stop(self) -> None:
        self._store.released.set()
        self._grpc.stop(grace=None)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()

    @property
    def raw_bytes(self) -> list[bytes]:
        """Every request body (after transport decompression).

        HTTP bodies are kept byte for byte; gRPC ones as the parsed message
        re-serialised, which holds every field (unknown ones included).
        """
        return list(self._store.raw)

    @property
    def requests(self) -> list[ExportTraceServiceRequest]:
        return [request for _, request in self._store.requests]

    def spans(self) -> list[ReceivedSpan]:
        return list(self._iter_spans())

    def _iter_spans(self) -> Iterator[ReceivedSpan]:
        for transport, request in list(self._store.requests):
            for resource_spans in request.resource_spans:
                resource = decode_attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        yield ReceivedSpan(span, scope_spans.scope.name, resource, transport)

    def wait_for_spans(self, count: int, timeout_s: float = 10.0) -> list[ReceivedSpan]:
        """All spans once at least ``count`` arrived; raise after ``timeout_s``."""
        arrived, seen = self._store.wait_for_spans(count, timeout_s)
        if not arrived:
            raise TimeoutError(f"{seen} of {count} spans arrived within {timeout_s} s")
        return self.spans()
