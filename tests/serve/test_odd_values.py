"""OTLP values that are valid but odd (issue 41): each costs at most itself,
never the batch, and reads the same from OTLP/JSON as from protobuf."""

from __future__ import annotations

import re
from typing import Any

import orjson
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from toolspan.serve._otlp import from_json, from_message

_TRACE, _SPAN = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
_UINT64_MAX = 2**64 - 1


def _span(**fields: Any) -> dict[str, Any]:
    return {
        "traceId": _TRACE,
        "spanId": _SPAN,
        "name": "tool",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [],
        "status": {},
        **fields,
    }


def _request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": list(spans)}]}]}


def _spans(line: bytes | None) -> list[dict[str, Any]]:
    assert line is not None
    return [
        span
        for resource in orjson.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def test_a_lone_surrogate_becomes_the_replacement_character_and_the_batch_is_kept() -> None:
    body = orjson.dumps(_request(_span(name="NAME"), _span(spanId="aaaaaaaaaaaaaaaa")))
    body = body.replace(b"NAME", b"tool \\ud83d end")
    converted = from_json(body)
    assert (converted.spans, converted.rejected) == (2, 0)
    assert _spans(converted.line)[0]["name"] == "tool \ufffd end"


def test_a_surrogate_pair_escape_still_reads_as_its_character() -> None:
    body = orjson.dumps(_request(_span(name="NAME"))).replace(b"NAME", b"\\ud83d\\ude00")
    assert _spans(from_json(body).line)[0]["name"] == "\U0001f600"


def test_uint64_max_times_are_kept_clamped_from_json_and_from_protobuf() -> None:
    request = _request(_span(endTimeUnixNano=str(_UINT64_MAX)), _span(spanId="a" * 16))
    from_json_body = from_json(orjson.dumps(request))
    message = json_format.ParseDict(_as_proto_json(request), ExportTraceServiceRequest())
    from_pb = from_message(message)
    for converted in (from_json_body, from_pb):
        assert (converted.spans, converted.rejected) == (2, 0)
        assert _spans(converted.line)[0]["endTimeUnixNano"] == str(2**63 - 1)


def _as_proto_json(request: dict[str, Any]) -> dict[str, Any]:
    """OTLP/JSON's hex ids as protobuf's JSON mapping wants them (base64)."""
    import base64

    text = orjson.dumps(request).decode()

    def b64(match: re.Match[str]) -> str:
        return f'"{match.group(1)}": "{base64.b64encode(bytes.fromhex(match.group(2))).decode()}"'

    parsed: dict[str, Any] = orjson.loads(re.sub(r'"(traceId|spanId)":"([0-9a-f]+)"', b64, text))
    return parsed


def _double_value(converted_line: bytes | None) -> Any:
    return _spans(converted_line)[0]["attributes"][0]["value"]["doubleValue"]


def test_a_whole_double_is_stored_alike_from_json_and_from_protobuf() -> None:
    attributes = [{"key": "x", "value": {"doubleValue": 2}}]
    request = _request(_span(attributes=attributes))
    via_json = from_json(orjson.dumps(request)).line
    message = json_format.ParseDict(_as_proto_json(request), ExportTraceServiceRequest())
    via_pb = from_message(message).line
    assert orjson.dumps(_double_value(via_json)) == orjson.dumps(_double_value(via_pb)) == b"2.0"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def _snaked(value: Any, which: frozenset[str]) -> Any:
    if isinstance(value, list):
        return [_snaked(item, which) for item in value]
    if not isinstance(value, dict):
        return value
    return {
        (_snake(k) if k in which else k): (v if k == "key" else _snaked(v, which))
        for k, v in value.items()
    }


_FIELDS = [
    "resourceSpans",
    "scopeSpans",
    "traceId",
    "spanId",
    "parentSpanId",
    "startTimeUnixNano",
    "endTimeUnixNano",
    "stringValue",
    "intValue",
    "doubleValue",
    "droppedAttributesCount",
]


@settings(max_examples=100, deadline=None)
@given(
    which=st.frozensets(st.sampled_from(_FIELDS)),
    names=st.lists(st.text(max_size=6), min_size=1, max_size=3),
    key=st.sampled_from(["gen_ai.tool.name", "a_b", "resource_spans"]),
)
def test_snake_case_field_names_give_the_same_rows_as_camel_case(
    which: frozenset[str], names: list[str], key: str
) -> None:
    spans = [
        _span(
            spanId=f"{i + 1:016x}",
            parentSpanId="f" * 16,
            name=name,
            droppedAttributesCount=1,
            attributes=[
                {"key": key, "value": {"stringValue": name}},
                {"key": "n", "value": {"intValue": "3"}},
                {"key": "d", "value": {"doubleValue": 1.5}},
            ],
        )
        for i, name in enumerate(names)
    ]
    camel = from_json(orjson.dumps(_request(*spans)))
    snake = from_json(orjson.dumps(_snaked(_request(*spans), which)))
    assert camel.spans == snake.spans == len(names)
    assert snake.line == camel.line
