"""OTLP/gRPC: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``."""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.protobuf.any_pb2 import Any as AnyMessage
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
    TraceServiceServicer,
    add_TraceServiceServicer_to_server,
)

from .._errors import BadRequest, Overloaded, ServeError
from ._http import authorised
from ._otlp import from_message
from ._spool import Spool

__all__ = ["MAX_QUEUED_CALLS", "start_grpc"]

MAX_QUEUED_CALLS = 1024


class _TraceService(TraceServiceServicer):
    def __init__(self, spool: Spool, token: str | None) -> None:
        self._spool = spool
        self._token = token

    def Export(
        self, request: ExportTraceServiceRequest, context: Any
    ) -> ExportTraceServiceResponse:
        metadata = dict(context.invocation_metadata())
        if not authorised(self._token, metadata.get("authorization")):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "a bearer token is required")
        try:
            converted = from_message(request)
        except BadRequest as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if converted.line is not None:
            try:
                self._spool.append(converted.line, converted.spans).result()
            except Overloaded as exc:
                _abort_retry_later(context, str(exc), exc.retry_after_s)
            except ServeError as exc:
                _abort_retry_later(context, str(exc), 1.0)
        response = ExportTraceServiceResponse()
        if converted.rejected or converted.error:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(
                    rejected_spans=converted.rejected, error_message=converted.error
                )
            )
        return response


def _abort_retry_later(context: Any, message: str, retry_after_s: float) -> None:
    """UNAVAILABLE with a RetryInfo, in the trailer the OpenTelemetry exporters
    read (``google.rpc.retryinfo-bin``) and in the rich status."""
    seconds = int(retry_after_s)
    delay = Duration(seconds=seconds, nanos=int((retry_after_s - seconds) * 1e9))
    info = RetryInfo(retry_delay=delay)
    detail = AnyMessage()
    detail.Pack(info)
    status = Status(code=grpc.StatusCode.UNAVAILABLE.value[0], message=message, details=[detail])
    context.set_trailing_metadata(
        (
            ("google.rpc.retryinfo-bin", info.SerializeToString()),
            ("grpc-status-details-bin", status.SerializeToString()),
        )
    )
    context.abort(grpc.StatusCode.UNAVAILABLE, message)


def start_grpc(
    spool: Spool,
    *,
    host: str,
    port: int,
    token: str | None,
    max_body_bytes: int,
    workers: int = 8,
) -> Any:
    """Start the gRPC server (its own thread pool); returns it, for ``stop``."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="toolspan-grpc"),
        options=[
            ("grpc.max_receive_message_length", max_body_bytes),
            ("grpc.so_reuseport", 0),
        ],
        # Calls past the workers wait in the pool's queue rather than being
        # refused: at 32 (workers * 4) exporters sending 100 at once lost
        # spans to RESOURCE_EXHAUSTED, which no OTel exporter retries. Past
        # this bound gRPC still answers RESOURCE_EXHAUSTED (issue 41).
        maximum_concurrent_rpcs=MAX_QUEUED_CALLS,
    )
    add_TraceServiceServicer_to_server(_TraceService(spool, token), server)  # type: ignore[no-untyped-call]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as exc:  # grpcio raises where it once returned 0
        raise ServeError(f"cannot listen for OTLP/gRPC on {address}") from exc
    if bound == 0:
        raise ServeError(f"cannot listen for OTLP/gRPC on {address}")
    server.start()
    return server
