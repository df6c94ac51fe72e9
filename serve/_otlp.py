"""OTLP export requests, from the wire to one OTLP/JSON line for the spool.

Protobuf bodies are decoded with the official ``opentelemetry-proto``
messages and mapped with protobuf's own JSON mapping (``json_format``), then
given what OTLP/JSON differs in: trace and span ids as hex, not base64, and
enums as integers. JSON bodies are parsed as they are. Either way the request
then passes the analyzer's own checks (``check_request``): a span the analyzer
would skip is rejected here, reported back as partial success, and the rest
is kept.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any, NamedTuple

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .._errors import BadRequest, TooLarge
from ..analyzer._inputs import check_request

__all__ = ["Converted", "decompress", "from_json", "from_message", "from_protobuf"]

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


class Converted(NamedTuple):
    """One request as the spool keeps it: its line (None when no span is left),
    the spans kept, the spans rejected and why."""

    line: bytes | None
    spans: int
    rejected: int
    error: str


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """``body`` decoded from ``Content-Encoding`` (identity or gzip), never more
    than ``limit`` bytes: a gzip bomb stops at the limit, not at the end."""
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise BadRequest(f"unsupported Content-Encoding {encoding!r} (identity or gzip)")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BadRequest(f"invalid gzip body: {exc}") from exc
    if len(out) > limit or inflater.unconsumed_tail:
        raise TooLarge(f"the body inflates to more than {limit:,} bytes")
    if not inflater.eof:
        raise BadRequest("invalid gzip body: it is cut off")
    return out


def from_protobuf(body: bytes) -> Converted:
    """An ExportTraceServiceRequest in protobuf, as one OTLP/JSON line."""
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except DecodeError as exc:
        raise BadRequest(f"not an ExportTraceServiceRequest in protobuf: {exc}") from exc
    return from_message(request)


def from_message(request: ExportTraceServiceRequest) -> Converted:
    """A decoded ExportTraceServiceRequest (from HTTP or gRPC) as one OTLP/JSON line."""
    as_json = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource in as_json.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return _checked(as_json)


def from_json(body: bytes) -> Converted:
    """An ExportTraceServiceRequest in OTLP/JSON, as one line."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"invalid JSON: {exc.msg} at character {exc.pos + 1}") from exc
    return _checked(request)


def _hex_ids(item: dict[str, Any]) -> None:
    for field in _ID_FIELDS:
        value = item.get(field)
        if value:
            item[field] = base64.b64decode(value).hex()


def _checked(request: Any) -> Converted:
    before = _count_spans(request)
    usable, problems = check_request(request)
    if not usable:
        raise BadRequest(problems[0])
    kept = _count_spans(request)
    error = "; ".join(problems[:5]) + (
        f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
    )
    line = orjson.dumps(request) if kept else None
    return Converted(line, kept, before - kept, error)


def _count_spans(request: Any) -> int:
    """Spans in a parsed request, whatever its shape (a bad part counts none)."""
    resources = request.get("resourceSpans") if isinstance(request, dict) else None
    total = 0
    for resource in resources if isinstance(resources, list) else ():
        scopes = resource.get("scopeSpans") if isinstance(resource, dict) else None
        for scope in scopes if isinstance(scopes, list) else ():
            if isinstance(scope, dict) and isinstance(scope.get("spans"), list):
                total += len(scope["spans"])
    return total
