"""The executor's hot path is built for speed (bench/tracer_overhead.py); these
tests pin what the fast constructions must still be."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from toolspan.tracer import ToolResult
from toolspan.tracer._next import Next


def every_field_distinct() -> dict[str, object]:
    return dict(
        ok=False,
        status="attempt_limit",
        tool="t",
        call_id="c",
        error_code="timeout",
        retryable=True,
        data={"a": [1]},
        message="m",
        attempts=3,
        total_wait_s=1.5,
        retry_after_s=2.0,
        truncated=True,
        replayed=True,
        reconciled=True,
        next=Next("try later", ("check",)),
    )


def test_the_hand_written_init_sets_exactly_the_declared_fields() -> None:
    # ToolResult's __init__ fills the instance dict itself: a field added to the
    # class but not to __init__ would silently keep its class-level default.
    values = every_field_distinct()
    assert list(values) == [f.name for f in dataclasses.fields(ToolResult)]
    result = ToolResult(**values)  # type: ignore[arg-type]
    assert vars(result) == values
    assert ToolResult(*values.values()) == result  # type: ignore[arg-type]


def test_defaults_match_the_declared_ones() -> None:
    result = ToolResult(ok=True, status="succeeded", tool="t", call_id="c")
    for f in dataclasses.fields(ToolResult)[4:]:
        assert getattr(result, f.name) == f.default, f.name


def test_results_stay_frozen_hashable_and_picklable() -> None:
    result = ToolResult(**every_field_distinct())  # type: ignore[arg-type]
    for name in ("ok", "data", "brand_new"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(result, name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(result, name)
    assert pickle.loads(pickle.dumps(result)) == result
    assert dataclasses.replace(result, attempts=4).attempts == 4
    plain = ToolResult(ok=True, status="succeeded", tool="t", call_id="c", data=1)
    assert hash(plain) == hash(ToolResult(True, "succeeded", "t", "c", data=1))
