"""``Finding`` is built with its own ``__init__`` (a report builds tens of
thousands, bench/analyzer_bench.py); these tests pin what it must still be:
a frozen dataclass with the declared fields and defaults."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import datetime

import pytest

from toolspan.analyzer import Finding


def every_field_distinct() -> dict[str, object]:
    return dict(
        kind="loop",
        conversation_id="conv",
        tool="search",
        idempotency_key="key",
        count=3,
        span_ids=("a" * 16, "b" * 16),
        trace_ids=("c" * 32,),
        first_seen=datetime(2026, 1, 1, 0, 0, 1),
        last_seen=datetime(2026, 1, 1, 0, 0, 2, 500),
        detail={"explanation": "why", "attempts": 4},
    )


def test_the_hand_written_init_sets_exactly_the_declared_fields() -> None:
    # A field added to the class but not to __init__ would silently keep its
    # class-level default (or be missing).
    values = every_field_distinct()
    assert list(values) == [f.name for f in dataclasses.fields(Finding)]
    finding = Finding(**values)  # type: ignore[arg-type]
    assert vars(finding) == values
    assert Finding(*values.values()) == finding  # type: ignore[arg-type]


def test_detail_defaults_to_a_new_empty_dict() -> None:
    values = every_field_distinct()
    del values["detail"]
    first, second = Finding(**values), Finding(**values)  # type: ignore[arg-type]
    assert first.detail == {} and second.detail == {}
    assert first.detail is not second.detail
    assert first == Finding(**values, detail={})  # type: ignore[arg-type]


def test_findings_stay_frozen_comparable_and_picklable() -> None:
    finding = Finding(**every_field_distinct())  # type: ignore[arg-type]
    for name in ("kind", "detail", "brand_new"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(finding, name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(finding, name)
    assert pickle.loads(pickle.dumps(finding)) == finding
    assert dataclasses.replace(finding, count=4).count == 4
    assert dataclasses.replace(finding, count=4) != finding
    assert finding.to_json()["last_seen"] == "2026-01-01T00:00:02.000500Z"
