"""Values a model, a tool or a peer may send that the encoders cannot take as
they are, and settings that would lift the bounds: structured results and
ConfigurationError, never a TypeError after the tool ran."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolspan.tracer import (
    ConfigurationError,
    Executor,
    RetryPolicy,
    Tool,
    ToolCall,
    ToolError,
)
from toolspan.tracer._tool import explain_schema_errors
from toolspan.tracer.integrations._common import model_reply
from toolspan.tracer.integrations.anthropic import tool_result_block
from toolspan.tracer.integrations.openai import function_call_output, tool_message
from toolspan.tracer.testing import FakeClock

from ..services import recording_http_server
from .conftest import Scripted


def _call(args: Any, name: str = "echo") -> ToolCall:
    return ToolCall(name, "c1", args, conversation_id="cv")


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


# -- item 16: model arguments orjson cannot encode ---------------------------------


@pytest.mark.parametrize(
    "args",
    [
        {"x": _nested(300)},
        {"x": 10**30},
        {"x": [-(2**64)]},
    ],
    ids=["nested-300", "int-30-digits", "negative-past-64-bits"],
)
def test_arguments_orjson_cannot_encode_are_invalid_arguments(make_executor, spans, args):
    fake = Scripted("ran")
    result = make_executor([Tool("echo", fake, parameters={"type": "object"})]).execute(_call(args))
    assert (result.ok, result.status, result.error_code) == (
        False,
        "invalid_arguments",
        "invalid_arguments",
    )
    assert "64 bits" in result.message and fake.calls == []
    assert spans.attrs(spans.call())["toolspan.status"] == "invalid_arguments"
    json.loads(result.to_json())


# -- items 2 and 17: results orjson cannot encode as they are -------------------------


def _renderings(result: Any) -> list[str]:
    return [
        result.to_json(),
        result.to_openai_message()["content"],
        result.to_anthropic_block()["content"],
        model_reply(result).text,
        tool_message(result)["content"],
        function_call_output(result)["output"],
        tool_result_block(result)["content"],
    ]


@pytest.mark.parametrize(
    "value, data",
    [
        ({1: "one", 2: {3: "three"}}, {"1": "one", "2": {"3": "three"}}),
        ({"n": 2**70}, {"n": str(2**70)}),
        ({"n": [-(2**63) - 1, 2**64 - 1]}, {"n": [str(-(2**63) - 1), 2**64 - 1]}),
        ({True: 1, None: 2, 1.5: 3}, {"true": 1, "null": 2, "1.5": 3}),
    ],
    ids=["int-keys", "int-past-64-bits", "int64-bounds", "other-keys"],
)
def test_results_with_values_orjson_refuses_are_canonicalised(make_executor, value, data):
    result = make_executor([Tool("echo", Scripted(value))]).execute(_call({}))
    assert result.ok and result.data == data and not result.truncated
    for text in _renderings(result):
        assert json.loads(text)["data"] == data


def test_a_result_nested_too_deep_is_cut_and_says_so(make_executor):
    result = make_executor([Tool("echo", Scripted(_nested(400)))]).execute(_call({}))
    assert result.ok and result.truncated and "deeper than" in result.message
    for text in _renderings(result):
        json.loads(text)


# -- item 19: settings that are not finite numbers ------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": math.nan},
        {"max_attempts": math.inf},
        {"max_attempts": 2.5},
        {"max_attempts": True},
        {"max_total_wait_s": math.nan},
        {"max_total_wait_s": math.inf},
        {"base_delay_s": math.nan},
        {"max_delay_s": math.inf},
        {"deadline_s": math.nan},
        {"deadline_s": math.inf},
    ],
)
def test_policy_settings_must_be_finite(kwargs):
    with pytest.raises(ConfigurationError):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize("size", [100.5, math.nan, math.inf, "4096"])
def test_max_result_bytes_is_an_integer_of_at_least_64(size):
    with pytest.raises(ConfigurationError, match="max_result_bytes"):
        Executor([Tool("echo", Scripted("x"))], max_result_bytes=size)


def test_a_nan_policy_no_longer_retries_without_end():
    # What the nan policy did: keep retrying past any bound. Now refused up front;
    # the largest finite policy still stops at its attempts.
    with pytest.raises(ConfigurationError):
        RetryPolicy(max_attempts=math.nan, max_total_wait_s=math.nan)
    clock = FakeClock()
    fake = Scripted(*[ToolError("timeout")] * 10)
    executor = Executor(
        [Tool("echo", fake)],
        policy=RetryPolicy(max_attempts=3, max_total_wait_s=1e9),
        sleep=clock.sleep,
        clock=clock,
    )
    assert executor.execute(_call({})).attempts == 3


# -- item 1: an error's text is capped like a result ----------------------------------


def test_a_huge_error_text_is_capped_like_a_result(make_executor, spans):
    fake = Scripted(ToolError("http_400", "é" * 1_000_000 + "tail"))
    result = make_executor([Tool("echo", fake)], max_result_bytes=1024).execute(_call({}))
    assert result.status == "permanent_error"
    assert len(result.message.encode()) <= 1024 + 100  # the cap plus the status sentence
    assert "tail" not in result.message
    for span in spans.all():
        assert len((span.status.description or "").encode()) <= 1024 + 100
    result.message.encode()  # cut on a character boundary


# -- item 5: $ref outside the schema is never resolved --------------------------------


@pytest.fixture
def schema_host() -> Iterator[tuple[str, list[str]]]:
    with recording_http_server() as (base, seen):
        yield base, seen


def _with_ref(ref: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"$ref": ref}}}


def test_a_remote_ref_is_refused_without_a_request(schema_host):
    url, seen = schema_host
    for schema in (
        _with_ref(f"{url}/schema.json"),
        {"$id": f"{url}/base/", "type": "object", "properties": {"x": {"$ref": "other.json"}}},
    ):
        with pytest.raises(ConfigurationError, match=r"\$ref"):
            Tool("echo", Scripted("x"), parameters=schema)
    assert seen == []


def test_a_file_ref_is_refused_and_its_values_never_reach_the_message(tmp_path: Path):
    secret = tmp_path / "secret.json"
    secret.write_text('{"enum": ["hunter2-from-the-disk"]}')
    with pytest.raises(ConfigurationError) as refused:
        Tool("echo", Scripted("x"), parameters=_with_ref(secret.as_uri()))
    assert "hunter2" not in str(refused.value)


def test_the_explaining_validator_never_retrieves_either(schema_host):
    url, seen = schema_host
    message = explain_schema_errors(_with_ref(f"{url}/schema.json"), {"x": 7})
    assert message.startswith("invalid arguments") and seen == []


def test_a_local_ref_keeps_working(make_executor):
    schema = {
        "type": "object",
        "$defs": {"id": {"type": "string", "minLength": 2}},
        "properties": {"order_id": {"$ref": "#/$defs/id"}},
        "required": ["order_id"],
    }
    executor = make_executor([Tool("echo", Scripted("ok"), parameters=schema)])
    assert executor.execute(_call({"order_id": "A-1"})).ok
    refused = executor.execute(_call({"order_id": "A"}))
    assert refused.status == "invalid_arguments" and "order_id" in refused.message


# -- a property: whatever a tool returns, every rendering is JSON ---------------------

_keys = st.one_of(st.text(max_size=3), st.integers(-5, 5), st.booleans())
_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.floats(allow_nan=False)
)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(value=_values)
def test_every_result_renders_as_json(value):
    result = Executor([Tool("echo", Scripted(value))]).execute(_call({}))
    assert result.ok
    for text in _renderings(result):
        body = json.loads(text)
        assert orjson.loads(orjson.dumps(body["data"])) == body["data"]
