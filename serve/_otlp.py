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
import json
import re
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
_INT64_MAX = 2**63 - 1


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
    resources, problems, kept, rejected = [], [], 0, 0
    for i, resource_spans in enumerate(request.resource_spans):
        if _repeated_key(resource_spans.resource.attributes):
            rejected += sum(len(scope.spans) for scope in resource_spans.scope_spans)
            problems.append(f"resourceSpans[{i}].resource.attributes has a key twice")
            continue
        scopes = []
        for j, scope_spans in enumerate(resource_spans.scope_spans):
            scope = _message(scope_spans)
            spans = []
            for k, span in enumerate(scope_spans.spans):
                mapped = _span(span)
                if isinstance(mapped, str):
                    problems.append(f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}].{mapped}")
                    rejected += 1
                else:
                    spans.append(mapped)
            scope["spans"] = spans
            kept += len(spans)
            scopes.append(scope)
        resource = _message(resource_spans)
        resource["scopeSpans"] = scopes
        resources.append(resource)
    line = orjson.dumps({"resourceSpans": resources}) if kept else None
    return Converted(line, kept, rejected, _summary(problems))


def _repeated_key(attributes: Any) -> bool:
    return len({kv.key for kv in attributes}) != len(attributes)


def _message(message: Any) -> dict[str, Any]:
    """The official mapping of ``message`` without its repeated children
    (mapped apart): clear them on a copy, then map."""
    rest = type(message)()
    rest.CopyFrom(message)
    for name in ("spans", "scope_spans"):
        if name in type(message).DESCRIPTOR.fields_by_name:
            rest.ClearField(name)
    mapped: dict[str, Any] = json_format.MessageToDict(rest, use_integers_for_enums=True)
    return mapped


def _span(span: Any) -> dict[str, Any] | str:
    """One span in OTLP/JSON, or why the analyzer would skip it (its rules, on
    the protobuf form). The fields every span has are read directly
    (json_format walks descriptors per field: 7x slower for a whole request);
    the rarer parts (events, links, array and map values) go through the
    official mapping, with the ids OTLP/JSON wants in hex."""
    if len(span.trace_id) != 16:
        return f"traceId is not 16 bytes: {len(span.trace_id)}"
    if len(span.span_id) != 8:
        return f"spanId is not 8 bytes: {len(span.span_id)}"
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    # A fixed64 past 2^63-1 is valid on the wire; keep the span, its time
    # clamped to the largest the analyzer's BIGINT holds.
    start, end = min(start, _INT64_MAX), min(end, _INT64_MAX)
    attributes = _attributes(span.attributes)
    if attributes is None:
        return "attributes has a key twice"
    out: dict[str, Any] = {
        "traceId": span.trace_id.hex(),
        "spanId": span.span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": attributes,
        "status": {"code": span.status.code, "message": span.status.message}
        if span.HasField("status")
        else {},
    }
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id.hex()
    if span.trace_state:
        out["traceState"] = span.trace_state
    if span.flags:
        out["flags"] = span.flags
    for field, value in (
        ("droppedAttributesCount", span.dropped_attributes_count),
        ("droppedEventsCount", span.dropped_events_count),
        ("droppedLinksCount", span.dropped_links_count),
    ):
        if value:
            out[field] = value
    if span.events:
        out["events"] = [
            json_format.MessageToDict(event, use_integers_for_enums=True) for event in span.events
        ]
    if span.links:
        links = [
            json_format.MessageToDict(link, use_integers_for_enums=True) for link in span.links
        ]
        for link in links:
            _hex_ids(link)
        out["links"] = links
    return out


def _attributes(attributes: Any) -> list[dict[str, Any]] | None:
    """Key-values in OTLP/JSON, or None when a key repeats. One loop, inlined
    for the common scalar types: per span it is most of the conversion's time."""
    out: list[dict[str, Any]] = []
    keys: set[str] = set()
    for kv in attributes:
        key = kv.key
        keys.add(key)
        value = kv.value
        which = value.WhichOneof("value")
        if which == "string_value":
            out.append({"key": key, "value": {"stringValue": value.string_value}})
        elif which == "int_value":
            out.append({"key": key, "value": {"intValue": str(value.int_value)}})
        elif which == "bool_value":
            out.append({"key": key, "value": {"boolValue": value.bool_value}})
        else:
            mapped: dict[str, Any] = json_format.MessageToDict(kv, use_integers_for_enums=True)
            mapped.setdefault("value", {})
            out.append(mapped)
    return out if len(keys) == len(out) else None


def from_json(body: bytes) -> Converted:
    """An ExportTraceServiceRequest in OTLP/JSON, as one line."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        request = _lenient(body, exc)
    return _checked(_normalised(request))


def _lenient(body: bytes, error: orjson.JSONDecodeError) -> Any:
    """``body`` parsed by the standard library, which (unlike orjson) takes a
    lone surrogate escape; each becomes U+FFFD, as protobuf and gRPC do, so
    one odd string costs its characters, not the batch."""
    try:
        return _replace_surrogates(json.loads(body))
    except (ValueError, RecursionError):
        raise BadRequest(f"invalid JSON: {error.msg} at character {error.pos + 1}") from error


_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _normalised(value: Any) -> Any:
    """The protobuf JSON mapping's other spellings made the ones the analyzer
    reads: field names in snake_case (``resource_spans``) as lowerCamelCase,
    a whole-number ``doubleValue`` as a float (so ``2`` stores as protobuf's
    ``2.0``), times past 2^63-1 (valid fixed64) clamped to it. Attribute keys
    are values, not field names, so they are never renamed."""
    if isinstance(value, list):
        return [_normalised(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel(key) if isinstance(key, str) and "_" in key else key
        if name == "doubleValue" and isinstance(item, int) and not isinstance(item, bool):
            item = float(item)
        elif name in ("startTimeUnixNano", "endTimeUnixNano", "timeUnixNano"):
            item = _clamped_time(item)
        elif name != "key":
            item = _normalised(item)
        out.setdefault(name, item)
    return out


def _clamped_time(value: Any) -> Any:
    try:
        number = int(value) if isinstance(value, str | int) else None
    except ValueError:
        return value
    if number is not None and _INT64_MAX < number < 2**64:
        return str(_INT64_MAX) if isinstance(value, str) else _INT64_MAX
    return value


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
    line = orjson.dumps(request) if kept else None
    return Converted(line, kept, before - kept, _summary(problems))


def _summary(problems: list[str]) -> str:
    more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
    return "; ".join(problems[:5]) + more


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
