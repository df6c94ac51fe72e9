"""OTLP/HTTP (``POST /v1/traces``) and the read-only JSON API, as one ASGI app
(Starlette, served by uvicorn)."""

from __future__ import annotations

import asyncio
import hmac
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import orjson
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._errors import BadRequest, Overloaded, ServeError, TooLarge
from ._otlp import Converted, decompress, from_json, from_protobuf
from ._spool import Spool

__all__ = ["Api", "make_app"]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
# gRPC status codes, for the google.rpc.Status bodies of error answers.
_INVALID_ARGUMENT, _RESOURCE_EXHAUSTED, _UNAVAILABLE, _UNAUTHENTICATED = 3, 8, 14, 16


class Api(Protocol):
    """What the JSON API reads: the continuous analyser's figures."""

    def summary(self) -> dict[str, Any]: ...

    def findings(self, since: datetime | None) -> list[dict[str, Any]]: ...


def authorised(token: str | None, header: str | None) -> bool:
    """Whether ``header`` (an Authorization value) carries ``token``, compared
    in constant time; anything goes when no token is set."""
    if token is None:
        return True
    given = header or ""
    scheme, _, value = given.partition(" ")
    return hmac.compare_digest(
        value.strip().encode() if scheme.lower() == "bearer" else b"", token.encode()
    )


def make_app(spool: Spool, api: Api | None, *, token: str | None, max_body_bytes: int) -> Starlette:
    """The ASGI app of the HTTP port."""

    async def traces(request: Request) -> Response:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        as_json = content_type == JSON
        if not authorised(token, request.headers.get("authorization")):
            return _error(401, _UNAUTHENTICATED, "a bearer token is required", as_json)
        if content_type not in (PROTOBUF, JSON):
            return _error(
                415, _INVALID_ARGUMENT, f"Content-Type must be {PROTOBUF} or {JSON}", as_json
            )
        encoding = request.headers.get("content-encoding", "identity").strip().lower()
        try:
            body = await _read_body(request, max_body_bytes)
            convert = from_json if as_json else from_protobuf
            converted = await run_in_threadpool(_convert, convert, body, encoding, max_body_bytes)
        except TooLarge as exc:
            return _error(413, _RESOURCE_EXHAUSTED, str(exc), as_json)
        except BadRequest as exc:
            status = 415 if "Content-Encoding" in str(exc) else 400
            return _error(status, _INVALID_ARGUMENT, str(exc), as_json)
        if converted.line is not None:
            try:
                await asyncio.wrap_future(spool.append(converted.line, converted.spans))
            except Overloaded as exc:
                retry = str(max(1, math.ceil(exc.retry_after_s)))
                return _error(503, _UNAVAILABLE, str(exc), as_json, {"Retry-After": retry})
            except ServeError as exc:
                return _error(503, _UNAVAILABLE, str(exc), as_json, {"Retry-After": "1"})
        return _answer(converted, as_json)

    def guarded(
        handler: Callable[[Request], Any],
    ) -> Callable[[Request], Any]:
        async def run(request: Request) -> Response:
            if not authorised(token, request.headers.get("authorization")):
                return _json(401, {"error": "a bearer token is required"})
            if api is None:
                return _json(503, {"error": "the analyser is not running"})
            result: Response = await handler(request)
            return result

        return run

    async def summary(request: Request) -> Response:
        assert api is not None
        return _json(200, await run_in_threadpool(api.summary))

    async def findings(request: Request) -> Response:
        assert api is not None
        raw = request.query_params.get("since") or ""
        try:
            since = datetime.fromisoformat(raw) if raw else None
        except ValueError:
            return _json(400, {"error": f"since is not an ISO 8601 time: {raw[:40]!r}"})
        return _json(200, {"findings": await run_in_threadpool(api.findings, since)})

    return Starlette(
        routes=[
            Route("/v1/traces", traces, methods=["POST"]),
            Route("/api/v1/summary", guarded(summary), methods=["GET"]),
            Route("/api/v1/findings", guarded(findings), methods=["GET"]),
        ]
    )


def _convert(
    convert: Callable[[bytes], Converted], body: bytes, encoding: str, limit: int
) -> Converted:
    return convert(decompress(body, encoding, limit))


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused (TooLarge) as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the body is over {limit:,} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"the body is over {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _answer(converted: Converted, as_json: bool) -> Response:
    if as_json:
        partial: dict[str, Any] = {}
        if converted.rejected or converted.error:
            partial = {
                "partialSuccess": {
                    "rejectedSpans": str(converted.rejected),
                    "errorMessage": converted.error,
                }
            }
        return _json(200, partial)
    response = ExportTraceServiceResponse()
    if converted.rejected or converted.error:
        response.partial_success.CopyFrom(
            ExportTracePartialSuccess(
                rejected_spans=converted.rejected, error_message=converted.error
            )
        )
    return Response(response.SerializeToString(), 200, media_type=PROTOBUF)


def _error(
    status: int,
    code: int,
    message: str,
    as_json: bool,
    headers: dict[str, str] | None = None,
) -> Response:
    """An error answer: a google.rpc.Status, as the OTLP/HTTP specification asks."""
    if as_json:
        return _json(status, {"code": code, "message": message}, headers)
    body = Status(code=code, message=message).SerializeToString()
    return Response(body, status, headers=headers, media_type=PROTOBUF)


def _json(status: int, value: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(value), status, headers=headers, media_type=JSON)
