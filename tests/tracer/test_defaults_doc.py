"""docs/defaults.md lists every setting of each class with the default the code has."""

from __future__ import annotations

import dataclasses
import inspect
import re
import time
from pathlib import Path
from typing import Any

import pytest

from toolspan.tracer import DEFAULT_RETRYABLE_CODES, Executor, RetryPolicy, Safeguards, Tool
from toolspan.tracer._executor import IN_MEMORY

DOC = Path(__file__).parents[2] / "docs" / "defaults.md"
REQUIRED = object()
NAMES = {"DEFAULT_RETRYABLE_CODES": DEFAULT_RETRYABLE_CODES, "IN_MEMORY": IN_MEMORY, "time": time}


def documented(heading: str) -> dict[str, Any]:
    """The table under ``## `<heading>`...``: setting -> its default as a value."""
    section = DOC.read_text().split(f"## `{heading}`", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, Any] = {}
    for name, default in re.findall(r"^\| `(\w+)` \| (required|`[^`]*`) \|", section, re.M):
        rows[name] = REQUIRED if default == "required" else eval(default.strip("`"), NAMES)
    return rows


def dataclass_defaults(cls: type) -> dict[str, Any]:
    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.init:
            if field.default is not dataclasses.MISSING:
                defaults[field.name] = field.default
            elif field.default_factory is not dataclasses.MISSING:
                defaults[field.name] = field.default_factory()
            else:
                defaults[field.name] = REQUIRED
    return defaults


def signature_defaults(function: Any) -> dict[str, Any]:
    parameters = list(inspect.signature(function).parameters.values())[1:]  # self
    return {
        p.name: REQUIRED if p.default is inspect.Parameter.empty else p.default for p in parameters
    }


@pytest.mark.parametrize(
    ("heading", "actual"),
    [
        ("RetryPolicy", lambda: dataclass_defaults(RetryPolicy)),
        ("Safeguards", lambda: dataclass_defaults(Safeguards)),
        ("Executor", lambda: signature_defaults(Executor.__init__)),
        ("Tool", lambda: dataclass_defaults(Tool)),
    ],
)
def test_every_setting_is_listed_with_its_default(heading, actual):
    assert documented(heading) == actual()


def test_the_in_memory_guards_differ_as_the_page_says():
    guards = Safeguards.in_memory()
    text = DOC.read_text()
    assert f"`guard_ttl_s={guards.guard_ttl_s}`" in text
    assert f"`detect_store_loss={guards.detect_store_loss}`" in text
