"""OTLP/gRPC: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``.

An asyncio server (``grpc.aio``) on an event loop of its own thread. It counts
the calls in flight and the bytes of request bodies read but not yet
converted itself, so that it queues calls while memory allows and, past
either bound, refuses at once with what the exporters retry:
RESOURCE_EXHAUSTED carrying a RetryInfo (the Python, Go and Collector
exporters wait it out; the Python one does not reopen its channel, as it does
on UNAVAILABLE). grpcio's synchronous server could only refuse past
``maximum_concurrent_rpcs`` on its own polling thread, without a RetryInfo.

Before any of that, one connection has at most ``max_streams_per_connection``
calls open (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): grpc's core reads a
stream's whole body whether or not the loop has taken its call yet, so the
bodies it holds are bounded by the streams, and a client past the limit
queues its calls on its side instead of sending them.

``Export`` is registered as a stream-unary method so that the body is read
only once the call is admitted: a refused call's body is never read here. The
conversion (protobuf decoding, the OTLP/JSON mapping, the spool append) runs
in a pool of ``workers`` threads, so a flood of calls queues for it and
leaves the rest of the process (the HTTP receiver, the analyser) its share.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc  # type: ignore[import-untyped]
from google.protobuf.any_pb2 import Any as AnyMessage
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from .._errors import BadRequest, Overloaded, ServeError
from ._http import authorised
from ._otlp import Converted, from_protobuf
from ._spool import Spool

__all__ = ["MAX_QUEUED_CALLS", "MAX_STREAMS_PER_CONNECTION", "GrpcLimits", "GrpcReceiver"]

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
MAX_QUEUED_CALLS = 1024
MAX_STREAMS_PER_CONNECTION = 16


@dataclass(frozen=True)
class GrpcLimits:
    """What the receiver holds at once; past a bound, RESOURCE_EXHAUSTED + RetryInfo."""

    # Calls in flight: waiting to be read, queued for a worker, converting or
    # waiting for the spool's fsync.
    max_calls: int = MAX_QUEUED_CALLS
    # Bytes of request bodies read and not yet converted (the queue's memory).
    max_queued_bytes: int = 64 * 1024 * 1024
    # Threads converting at once. The conversion is Python under the
    # interpreter lock, so more threads add no speed, only bodies being
    # converted at once (each about 15x its body in Python objects).
    workers: int = 2
    # HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: the calls one connection has
    # open at once. grpc's core reads a stream's whole body before the event
    # loop takes the call; past this the client queues its calls on its side
    # (the Python, Go, Java and JS clients wait for a free stream), where
    # they hold no memory of this process.
    max_streams_per_connection: int = MAX_STREAMS_PER_CONNECTION
    # A refusal's RetryInfo is this to twice this, at random: the Python and
    # Go exporters wait exactly what it says (no jitter of their own), so one
    # value would bring every refused call back at the same instant.
    retry_after_s: float = 1.0


class _Admission:
    """The calls in flight and the bytes queued. Only the event loop's thread
    touches them, so they need no lock."""

    def __init__(self, limits: GrpcLimits) -> None:
        self.limits = limits
        self.calls = 0
        self.peak_calls = 0  # the most calls in flight at once
        self.queued_bytes = 0
        self.peak_queued_bytes = 0
        self.refused = 0  # calls answered RESOURCE_EXHAUSTED + RetryInfo

    def enter(self) -> str | None:
        """Count one more call in, or say why not (nothing counted then)."""
        limits = self.limits
        if self.calls >= limits.max_calls:
            return self._refused(f"more than {limits.max_calls:,} gRPC calls at once")
        # A full queue refuses before the call's body is even read.
        if self.queued_bytes >= limits.max_queued_bytes:
            return self._refused(self._full())
        self.calls += 1
        self.peak_calls = max(self.peak_calls, self.calls)
        return None

    def leave(self) -> None:
        self.calls -= 1

    def queue(self, size: int) -> str | None:
        """Count a body of ``size`` bytes read, or say why not. One body always
        fits an empty queue (it is under max_body_bytes): queued, not refused."""
        if self.queued_bytes and self.queued_bytes + size > self.limits.max_queued_bytes:
            return self._refused(self._full())
        self.queued_bytes += size
        self.peak_queued_bytes = max(self.peak_queued_bytes, self.queued_bytes)
        return None

    def dequeue(self, size: int) -> None:
        self.queued_bytes -= size

    def _full(self) -> str:
        return f"more than {self.limits.max_queued_bytes:,} bytes of gRPC requests wait"

    def _refused(self, reason: str) -> str:
        self.refused += 1
        return reason


def _retry_info_trailers(
    code: grpc.StatusCode, message: str, retry_after_s: float
) -> tuple[tuple[str, bytes], ...]:
    """A RetryInfo in the trailer the OpenTelemetry exporters read
    (``google.rpc.retryinfo-bin``) and in the rich status."""
    seconds = int(retry_after_s)
    delay = Duration(seconds=seconds, nanos=int((retry_after_s - seconds) * 1e9))
    info = RetryInfo(retry_delay=delay)
    detail = AnyMessage()
    detail.Pack(info)
    status = Status(code=code.value[0], message=message, details=[detail])
    return (
        ("google.rpc.retryinfo-bin", info.SerializeToString()),
        ("grpc-status-details-bin", status.SerializeToString()),
    )


async def _abort_retry_later(
    context: Any, code: grpc.StatusCode, message: str, retry_after_s: float
) -> NoReturn:
    await _abort(context, code, message, _retry_info_trailers(code, message, retry_after_s))


async def _abort(
    context: Any, code: grpc.StatusCode, message: str, trailers: tuple[Any, ...] = ()
) -> NoReturn:
    await context.abort(code, message, trailers)
    raise AssertionError("unreachable: abort raises")  # pragma: no cover


def _response(converted: Converted) -> bytes:
    response = ExportTraceServiceResponse()
    if converted.rejected or converted.error:
        response.partial_success.CopyFrom(
            ExportTracePartialSuccess(
                rejected_spans=converted.rejected, error_message=converted.error
            )
        )
    data: bytes = response.SerializeToString()
    return data


class _TraceService:
    """``Export`` on raw bytes: admitted, read, converted in the pool, spooled."""

    def __init__(
        self,
        spool: Spool,
        token: str | None,
        admission: _Admission,
        pool: ThreadPoolExecutor,
        jitter: Callable[[], float],
    ) -> None:
        self._spool = spool
        self._token = token
        self._admission = admission
        self._pool = pool
        self._jitter = jitter

    async def export(self, requests: AsyncIterator[bytes], context: Any) -> bytes:
        # ``requests`` is not iterated: ``context.read()`` reads the one
        # message, and only once the call is admitted.
        metadata = dict(context.invocation_metadata() or ())
        if not authorised(self._token, metadata.get("authorization")):
            await _abort(context, grpc.StatusCode.UNAUTHENTICATED, "a bearer token is required")
        await self._refuse(context, self._admission.enter())
        try:
            body = await context.read()
            if body is grpc.aio.EOF:
                await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "no request message")
            converted, written = await self._convert(context, body)
            if written is not None:
                await self._written(context, written)
            return _response(converted)
        finally:
            self._admission.leave()

    async def _refuse(self, context: Any, refusal: str | None) -> None:
        """Past a bound: RESOURCE_EXHAUSTED + RetryInfo, retried by Python, Go, the Collector."""
        if refusal is not None:
            retry_after_s = self._admission.limits.retry_after_s * (1.0 + self._jitter())
            await _abort_retry_later(
                context, grpc.StatusCode.RESOURCE_EXHAUSTED, refusal, retry_after_s
            )

    async def _convert(self, context: Any, body: bytes) -> tuple[Converted, Future[None] | None]:
        """Queue ``body`` for a worker (counted until it is converted)."""
        await self._refuse(context, self._admission.queue(len(body)))
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, self._convert_and_spool, body)
        except BadRequest as exc:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Overloaded as exc:
            await _abort_retry_later(
                context, grpc.StatusCode.UNAVAILABLE, str(exc), exc.retry_after_s
            )
        finally:
            self._admission.dequeue(len(body))

    def _convert_and_spool(self, body: bytes) -> tuple[Converted, Future[None] | None]:
        """In a worker thread: decode, map, and queue the line for the spool's writer."""
        converted = from_protobuf(body)
        if converted.line is None:
            return converted, None
        return converted, self._spool.append(converted.line, converted.spans)

    async def _written(self, context: Any, written: Future[None]) -> None:
        """Wait for the fsync without holding a worker (many calls share one)."""
        try:
            await asyncio.wrap_future(written)
        except ServeError as exc:
            await _abort_retry_later(context, grpc.StatusCode.UNAVAILABLE, str(exc), 1.0)


class GrpcReceiver:
    """The gRPC server on its own thread and event loop: :meth:`start`, :meth:`stop`."""

    def __init__(
        self,
        spool: Spool,
        *,
        host: str,
        port: int,
        token: str | None,
        max_body_bytes: int,
        limits: GrpcLimits | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._max_body_bytes = max_body_bytes
        self.admission = _Admission(limits or GrpcLimits())
        self._pool = ThreadPoolExecutor(
            max_workers=self.admission.limits.workers, thread_name_prefix="toolspan-grpc"
        )
        self._service = _TraceService(spool, token, self.admission, self._pool, jitter)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._grace_s = 2.0
        self._thread: threading.Thread | None = None

    @property
    def refused(self) -> int:
        """Calls answered RESOURCE_EXHAUSTED + RetryInfo (past a bound)."""
        return self.admission.refused

    def start(self) -> GrpcReceiver:
        """Listen, or raise ``ServeError``; returns once the server takes calls."""
        started: Future[None] = Future()
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._serve(started),), name="toolspan-grpc-loop", daemon=True
        )
        self._thread.start()
        try:
            started.result()
        except BaseException:
            self._thread.join()
            self._thread = None
            self._pool.shutdown()
            raise
        return self

    def stop(self, grace_s: float = 2.0) -> None:
        """Refuse new calls, let those in flight finish (up to ``grace_s``), stop."""
        if self._thread is None:
            return
        self._grace_s = grace_s
        assert self._loop is not None and self._stopping is not None
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join()
        self._thread = None
        self._pool.shutdown()

    async def _serve(self, started: Future[None]) -> None:
        try:
            server = self._server()
            await server.start()
        except BaseException as exc:
            started.set_exception(exc)
            return
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        started.set_result(None)
        await self._stopping.wait()
        await server.stop(self._grace_s)

    def _server(self) -> Any:
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self._max_body_bytes),
                # The streams one connection has open at once: the client
                # waits for a free one (measured: at 200 calls of 1.3 MB on
                # one connection, core held every body before the loop took
                # the call, peak RSS 551 MiB without the analyser; 233 at 16).
                ("grpc.max_concurrent_streams", self.admission.limits.max_streams_per_connection),
                # By default core counts a stream until its call object is
                # freed, later than the client does, and refused (RST_STREAM
                # REFUSED_STREAM, UNAVAILABLE) 78 of 100 calls a client sent
                # within the limit: count HTTP/2's open streams instead.
                ("grpc.http.overload_protection", 0),
                ("grpc.so_reuseport", 0),
                # A call waits in grpc's core until the loop takes it, and the
                # loop shares the interpreter lock with the workers: under a
                # flood core cancelled calls that had waited 30 s (CANCELLED,
                # 12-32 of 200 calls of 1.3 MB). The caller's deadline decides.
                ("grpc.server_max_unrequested_time_in_server", 3600),
            ],
        )
        handler: Callable[[AsyncIterator[bytes], Any], Awaitable[bytes]] = self._service.export
        method = grpc.stream_unary_rpc_method_handler(handler)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"Export": method}),)
        )
        try:
            bound = server.add_insecure_port(self.address)
        except RuntimeError as exc:  # grpcio raises where it once returned 0
            raise ServeError(f"cannot listen for OTLP/gRPC on {self.address}") from exc
        if bound == 0:
            raise ServeError(f"cannot listen for OTLP/gRPC on {self.address}")
        return server
