"""The quick accept in front of the JSON Schema validator (``Tool._accept_args``)
never changes a verdict: the arguments are valid exactly when fastjsonschema
says so, whatever the quick check thought. Its fusion with the redaction
(``_tool.redacting_acceptor``) says "valid" exactly when it does, and then
gives exactly what the redactor gives."""

from __future__ import annotations

import copy
import math
from typing import Any

import fastjsonschema
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from toolspan.tracer import ConfigurationError, Redactor, Tool
from toolspan.tracer._tool import (
    _accept_with,
    _Acceptor,
    _quick_rules,
    parse_arguments,
    redacting_acceptor,
)


def _acceptor(schema: dict[str, Any] | None) -> _Acceptor | None:
    """The quick accept a tool of ``schema`` gets (as ``Tool.__post_init__`` builds it)."""
    rules = _quick_rules(schema)
    return None if rules is None else _accept_with(*rules)


NAMES = ["a", "b", "c", "d"]

bound = st.one_of(
    st.integers(-5, 20), st.floats(-5, 20, allow_nan=False), st.sampled_from([10**20, -(10**20)])
)
plain_property = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={"minLength": st.integers(0, 4), "maxLength": st.integers(0, 8)},
    ),
    st.just({"type": "boolean"}),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["integer", "number"])},
        optional={"minimum": bound, "maximum": bound, "description": st.just("d")},
    ),
    st.fixed_dictionaries(
        {"enum": st.lists(st.sampled_from(["x", "y", "zz", ""]), min_size=1, unique=True)},
        optional={"type": st.just("string")},
    ),
)
# Keywords outside the quick check's set: the schema must go to the validator alone.
other_property = st.sampled_from(
    [
        {"type": "string", "pattern": "^x"},
        {"type": "integer", "default": 3},
        {"type": ["string", "null"]},
        {"type": "integer", "exclusiveMinimum": 0},
        {"enum": [1, "x"]},
        {"type": "object"},
        {},
    ]
)
schemas = st.builds(
    lambda properties, required, closed, extra: {
        "type": "object",
        "properties": properties,
        "required": required,
        **({} if closed is None else {"additionalProperties": closed}),
        **extra,
    },
    st.dictionaries(
        st.sampled_from(NAMES), st.one_of(plain_property, plain_property, other_property)
    ),
    st.lists(st.sampled_from(NAMES), unique=True, max_size=3),
    st.sampled_from([None, True, False]),
    st.sampled_from([{}, {"description": "a tool"}, {"minProperties": 1}]),
)


class Text(str):
    """A str subclass: the quick check leaves it to the validator."""


values = st.one_of(
    st.text(max_size=10),
    st.builds(Text, st.text(max_size=3)),
    st.sampled_from(["x", "y", "zz", ""]),
    st.booleans(),
    st.integers(-10, 30),
    st.sampled_from([10**20, 2**70]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([5.0, -0.0, math.nan]),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)
instances = st.dictionaries(st.sampled_from([*NAMES, "e"]), values, max_size=5)


def validator_accepts(schema: dict[str, Any], instance: dict[str, Any]) -> bool:
    try:
        fastjsonschema.compile(schema)(copy.deepcopy(instance))
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


@settings(max_examples=600, deadline=None)
@given(schemas, instances)
def test_the_verdict_is_always_the_validators(schema: dict[str, Any], instance: Any) -> None:
    try:
        tool = Tool("t", lambda **_: None, parameters=schema)
    except ConfigurationError:
        assume(False)  # a schema the validator refuses to compile (required but closed)
    arguments, problem, _ = parse_arguments(tool, instance)
    assert (problem is None) == validator_accepts(schema, instance)
    accept = _acceptor(schema)
    if accept is not None and accept(dict(instance)):
        assert validator_accepts(schema, instance)
        assert arguments == instance  # nothing filled in or changed


def test_plain_schemas_take_the_quick_path_and_others_do_not() -> None:
    plain = {
        "type": "object",
        "description": "docks",
        "properties": {
            "dock_id": {"type": "string", "minLength": 1, "maxLength": 64},
            "bikes": {"type": "boolean"},
            "radius_m": {"type": "integer", "minimum": 0, "maximum": 5000},
            "share": {"type": "number", "maximum": 1},
            "unit": {"type": "string", "enum": ["m", "km"]},
        },
        "required": ["dock_id"],
        "additionalProperties": False,
    }
    accept = _acceptor(plain)
    assert accept is not None
    assert accept({"dock_id": "D-1", "bikes": True, "radius_m": 5, "share": 0.5, "unit": "km"})
    for unsure in (
        {},  # missing dock_id
        {"dock_id": ""},
        {"dock_id": "D", "radius_m": 5.0},  # integral float: the validator's call
        {"dock_id": "D", "radius_m": True},
        {"dock_id": "D", "share": math.nan},
        {"dock_id": "D", "unit": "mile"},
        {"dock_id": "D", "other": 1},
    ):
        assert not accept(unsure), unsure
    for keyword in ({"default": "m"}, {"pattern": "^m"}, {"format": "uri"}):
        with_it = copy.deepcopy(plain)
        with_it["properties"]["unit"].update(keyword)
        assert _acceptor(with_it) is None, keyword
    assert _acceptor({"type": "object", "additionalProperties": {"type": "string"}}) is None
    assert _acceptor({"properties": {}}) is None  # not declared an object
    assert _acceptor(None) is None


@pytest.mark.parametrize(
    ("radius", "ok"), [(5.0, True), (5.5, False), (True, False), (-1, False), (5000, True)]
)
def test_the_validator_still_decides_what_the_quick_check_leaves(radius: Any, ok: bool) -> None:
    schema = {
        "type": "object",
        "properties": {"radius_m": {"type": "integer", "minimum": 0, "maximum": 5000}},
    }
    tool = Tool("t", lambda **_: None, parameters=schema)
    assert (parse_arguments(tool, {"radius_m": radius})[1] is None) is ok


# Names the redactor treats differently: a secret, plain ones, a card-ish key
# (masked only when its value is a card number) and "value" (named by a neighbour).
REDACTION_NAMES = ["note", "api_key", "card", "value", "a"]
secretish = st.sampled_from(
    [
        "sk-live-0123456789abcdef0123",
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "password=hunter2 and more",
        "4111 1111 1111 1111",
        "postgres://u:pw@db/x",
        "plain words",
    ]
)
redaction_schemas = st.builds(
    lambda properties, required, closed: {
        "type": "object",
        "properties": properties,
        "required": required,
        **({} if closed is None else {"additionalProperties": closed}),
    },
    st.dictionaries(st.sampled_from(REDACTION_NAMES), plain_property, min_size=1),
    st.lists(st.sampled_from(REDACTION_NAMES), unique=True, max_size=2),
    st.sampled_from([None, True, False, False]),
)
redaction_instances = st.dictionaries(
    st.sampled_from([*REDACTION_NAMES, "e"]), st.one_of(secretish, values), max_size=5
)


def fitting(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments of the schema's own property types (mostly valid ones)."""
    by_type: dict[Any, st.SearchStrategy[Any]] = {
        "string": st.one_of(secretish, st.text(max_size=8)),
        "boolean": st.booleans(),
        "integer": st.integers(-10, 30),
        "number": st.floats(-10, 30),
    }
    fields = {
        name: st.sampled_from(rule["enum"]) if "enum" in rule else by_type[rule["type"]]
        for name, rule in schema["properties"].items()
    }
    return st.fixed_dictionaries({}, optional=fields)


@settings(max_examples=600, deadline=None)
@given(redaction_schemas, st.data())
def test_the_fused_check_agrees_with_the_quick_accept_and_the_redactor(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    instance = data.draw(st.one_of(redaction_instances, fitting(schema)))
    try:
        tool = Tool("t", lambda **_: None, parameters=schema)
    except ConfigurationError:
        assume(False)
    redactor = Redactor()
    fused = redacting_acceptor(tool, redactor)
    card_or_value = {"card", "value"} & set(schema["properties"])
    if fused is None:
        # Only where the two cannot fuse: an open schema, or a key of its own rules.
        assert schema.get("additionalProperties") is not False or card_or_value
        return
    assert schema.get("additionalProperties") is False and not card_or_value
    accept = tool._accept_args
    assert accept is not None
    redacted = fused(dict(instance))
    assert (redacted is not None) == accept(dict(instance))
    if redacted is not None:
        assert validator_accepts(schema, instance)
        assert redacted == Redactor().arguments(instance)
        assert "sk-live" not in str(redacted) and "hunter2" not in str(redacted)


def test_the_executor_records_the_same_arguments_with_and_without_the_fusion() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from toolspan.tracer import Executor, ToolCall

    class SameRules(Redactor):
        """Toolspan's own rules, but a subclass: the executor takes the two-pass path."""

    schema = {
        "type": "object",
        "properties": {
            "dock_id": {"type": "string", "minLength": 1},
            "api_key": {"type": "string"},
            "note": {"type": "string"},
            "radius_m": {"type": "integer", "minimum": 0},
        },
        "required": ["dock_id"],
        "additionalProperties": False,
    }
    calls = [
        {"dock_id": "D-1", "api_key": "hunter2-plain", "note": "plain"},
        {
            "dock_id": "D-2",
            "note": "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
            "radius_m": 5,
        },
        {"dock_id": "", "api_key": "sk-live-0123456789abcdef0123"},  # invalid: too short
        {"dock_id": "D-3", "radius_m": -1, "note": "password=hunter2"},  # invalid: negative
        {"dock_id": "D-4", "other": "sk-live-0123456789abcdef0123"},  # invalid: closed
    ]
    recorded = []
    for redactor in (Redactor(), SameRules()):
        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        executor = Executor(
            [Tool("dock", lambda **_: {"ok": 1}, parameters=schema)],
            tracer_provider=provider,
            redactor=redactor,
        )
        fused = [plan.quick_arguments is not None for plan in executor._core._plans.values()]
        assert fused == [type(redactor) is Redactor]
        results = [
            executor.execute(ToolCall("dock", f"c{i}", a, "conv")) for i, a in enumerate(calls)
        ]
        spans = [s for s in memory.get_finished_spans() if s.name.startswith("execute_tool")]
        recorded.append(
            [
                (r.status, dict(s.attributes or {}).get("gen_ai.tool.call.arguments"))
                for r, s in zip(results, spans, strict=True)
            ]
        )
    assert recorded[0] == recorded[1]
    assert [status for status, _ in recorded[0]] == ["succeeded"] * 2 + ["invalid_arguments"] * 3
    assert not any("sk-live" in text or "hunter2" in text for _, text in recorded[0])
