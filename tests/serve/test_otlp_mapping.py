"""The receiver's protobuf -> OTLP/JSON conversion (read field by field for
speed) says what protobuf's official JSON mapping says, for any request: the
same spans with the same fields, ids in hex as OTLP/JSON wants, and a span the
analyzer would skip rejected with its reason."""

from __future__ import annotations

from typing import Any

import orjson
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from toolspan.serve._otlp import from_message

_KEYS = st.sampled_from(["gen_ai.tool.name", "a", "b", "token", "x.y", "é"])
_TEXT = st.text(max_size=8)
_INT64 = st.integers(-(2**63), 2**63 - 1)


def _scalar(kind: str, value: Any) -> AnyValue:
    out = AnyValue()
    if kind == "array":
        for item in value:
            out.array_value.values.add().string_value = item
    elif kind == "kvlist":
        for key, item in value:
            entry = out.kvlist_value.values.add()
            entry.key, entry.value.int_value = key, item
    elif kind != "empty":
        setattr(out, kind, value)
    return out


_VALUES = st.one_of(
    st.tuples(st.just("string_value"), _TEXT),
    st.tuples(st.just("int_value"), _INT64),
    st.tuples(st.just("bool_value"), st.booleans()),
    st.tuples(st.just("double_value"), st.floats(allow_nan=False, allow_infinity=False)),
    st.tuples(st.just("bytes_value"), st.binary(max_size=4)),
    st.tuples(st.just("array"), st.lists(_TEXT, max_size=2)),
    st.tuples(st.just("kvlist"), st.lists(st.tuples(_KEYS, _INT64), max_size=2)),
    st.tuples(st.just("empty"), st.none()),
)
_ATTRIBUTES = st.lists(st.tuples(_KEYS, _VALUES), max_size=4)


def _fill(attributes: Any, drawn: list[tuple[str, tuple[str, Any]]]) -> None:
    for key, (kind, value) in drawn:
        kv: KeyValue = attributes.add()
        kv.key = key
        kv.value.CopyFrom(_scalar(kind, value))


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(1, 2))):
        resource = request.resource_spans.add()
        _fill(resource.resource.attributes, draw(_ATTRIBUTES))
        resource.schema_url = draw(_TEXT)
        for _ in range(draw(st.integers(0, 2))):
            scope = resource.scope_spans.add()
            scope.scope.name = draw(_TEXT)
            for _ in range(draw(st.integers(0, 3))):
                span = scope.spans.add()
                span.trace_id = draw(st.binary(min_size=15, max_size=16))
                span.span_id = draw(st.binary(min_size=8, max_size=9))
                span.parent_span_id = draw(st.sampled_from([b"", b"\x01" * 8]))
                span.name = draw(_TEXT)
                span.kind = draw(st.integers(0, 5))
                span.start_time_unix_nano = draw(st.integers(0, 2**63 - 1))
                span.end_time_unix_nano = draw(st.integers(0, 2**64 - 1))
                span.trace_state = draw(st.sampled_from(["", "k=v"]))
                span.flags = draw(st.sampled_from([0, 0x101]))
                span.dropped_attributes_count = draw(st.integers(0, 2))
                _fill(span.attributes, draw(_ATTRIBUTES))
                if draw(st.booleans()):
                    span.status.code = draw(st.integers(0, 2))
                    span.status.message = draw(_TEXT)
                for _ in range(draw(st.integers(0, 1))):
                    event = span.events.add()
                    event.name, event.time_unix_nano = draw(_TEXT), draw(st.integers(0, 9))
                    _fill(event.attributes, draw(_ATTRIBUTES))
                for _ in range(draw(st.integers(0, 1))):
                    link = span.links.add()
                    link.trace_id, link.span_id = b"\x02" * 16, b"\x03" * 8
                    _fill(link.attributes, draw(_ATTRIBUTES))
    return request


def _problem(span: Any) -> bool:
    keys = [kv.key for kv in span.attributes]
    return len(span.trace_id) != 16 or len(span.span_id) != 8 or len(set(keys)) != len(keys)


def _hex(item: dict[str, Any]) -> None:
    import base64

    for field in ("traceId", "spanId", "parentSpanId"):
        if item.get(field):
            item[field] = base64.b64decode(item[field]).hex()


def _meaning(value: Any) -> Any:
    """A mapping with the fields at their default left out (the official
    mapping omits them; OTLP/JSON readers treat both alike)."""
    if isinstance(value, dict):
        kept = {key: _meaning(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item not in ({}, [], "", "0", None)}
    if isinstance(value, list):
        return [_meaning(item) for item in value]
    if type(value) is int and value == 0:
        return None
    return value


@settings(max_examples=300, deadline=None)
@given(requests())
def test_the_conversion_says_what_the_official_mapping_says(
    request: ExportTraceServiceRequest,
) -> None:
    converted = from_message(request)
    expected_spans, rejected = [], 0
    official = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource, resource_pb in zip(
        official.get("resourceSpans", []), request.resource_spans, strict=True
    ):
        resource_keys = [kv.key for kv in resource_pb.resource.attributes]
        repeated = len(set(resource_keys)) != len(resource_keys)
        for scope, scope_pb in zip(
            resource.get("scopeSpans", []), resource_pb.scope_spans, strict=True
        ):
            for span, span_pb in zip(scope.get("spans", []), scope_pb.spans, strict=True):
                if repeated or _problem(span_pb):
                    rejected += 1
                    continue
                _hex(span)
                # A valid fixed64 past 2^63-1 is kept, clamped (issue 41).
                for field in ("startTimeUnixNano", "endTimeUnixNano"):
                    if field in span:
                        span[field] = str(min(int(span[field]), 2**63 - 1))
                for link in span.get("links", []):
                    _hex(link)
                expected_spans.append(_meaning(span))
    assert (converted.spans, converted.rejected) == (len(expected_spans), rejected)
    if converted.line is None:
        assert not expected_spans
        return
    line = orjson.loads(converted.line)
    got = [
        _meaning(span)
        for resource in line["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    assert got == expected_spans
