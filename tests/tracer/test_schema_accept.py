"""The quick accept in front of the JSON Schema validator (``_tool._acceptor``)
never changes a verdict: the arguments are valid exactly when fastjsonschema
says so, whatever the quick check thought."""

from __future__ import annotations

import copy
import math
from typing import Any

import fastjsonschema
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from toolspan.tracer import ConfigurationError, Tool
from toolspan.tracer._tool import _acceptor, parse_arguments

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


@settings(max_examples=1500, deadline=None)
@given(schemas, instances)
def test_the_verdict_is_always_the_validators(schema: dict[str, Any], instance: Any) -> None:
    try:
        tool = Tool("t", lambda **_: None, parameters=schema)
    except ConfigurationError:
        assume(False)  # a schema the validator refuses to compile (required but closed)
    arguments, problem = parse_arguments(tool, instance)
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
