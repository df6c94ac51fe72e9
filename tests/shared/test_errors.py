"""One exception tree: ToolspanError is the root of every error toolspan raises,
and the drawing in common/_errors.py is exactly that tree."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import toolspan
from toolspan import _errors
from toolspan._errors import ToolspanError

REPO = Path(__file__).resolve().parents[2]
# Modules that run a Streamlit script when imported.
SCRIPTS = ("toolspan.dashboard.app", "toolspan.dashboard._pages")


def _every_module() -> list[str]:
    names = [
        info.name
        for info in pkgutil.walk_packages(toolspan.__path__, "toolspan.")
        if not info.name.startswith(SCRIPTS)
    ]
    # walk_packages only finds what is under common/ (the root): the parts are mapped folders.
    for part in ("tracer", "analyzer", "dashboard", "serve"):
        package = importlib.import_module(f"toolspan.{part}")
        names.append(package.__name__)
        names += [
            info.name
            for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
            if not info.name.startswith(SCRIPTS)
        ]
    return sorted(set(names))


def _drawn_tree() -> dict[str, str | None]:
    """Class name -> parent name, read from the drawing in the module docstring."""
    doc = _errors.__doc__ or ""
    drawing = doc.split("::", 1)[1].split("\n\n", 2)[1]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in drawing.splitlines():
        match = re.match(r"^(\s*(?:[│├└─]\s*)*)(\w+)", line)
        assert match, line
        depth, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def _real_tree() -> dict[str, str | None]:
    for name in _every_module():
        importlib.import_module(name)
    parents: dict[str, str | None] = {"ToolspanError": None}
    pending = [ToolspanError]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("toolspan."):
                parents[sub.__name__] = cls.__name__
                pending.append(sub)
    return parents


def test_the_drawing_is_the_tree() -> None:
    assert _drawn_tree() == _real_tree()


def test_every_exception_class_toolspan_defines_is_in_the_tree() -> None:
    outside = [
        f"{module}.{name}"
        for module in _every_module()
        for name, cls in inspect.getmembers(importlib.import_module(module), inspect.isclass)
        if issubclass(cls, BaseException)
        and cls.__module__.startswith("toolspan")
        and not issubclass(cls, ToolspanError)
    ]
    assert outside == []


@pytest.mark.parametrize(
    ("public", "name"),
    [
        ("toolspan", "ToolspanError"),
        ("toolspan.tracer", "ToolspanError"),
        ("toolspan.tracer", "ConfigurationError"),
        ("toolspan.tracer", "ToolError"),
        ("toolspan.tracer._errors", "ToolError"),
        ("toolspan.tracer.store", "StoreError"),
        ("toolspan.tracer.store._protocol", "StoreError"),
        ("toolspan.analyzer", "ToolspanError"),
        ("toolspan.analyzer", "AnalyzerError"),
        ("toolspan.analyzer", "QueryError"),
        ("toolspan.analyzer._errors", "DatabaseError"),
        ("toolspan.dashboard", "ToolspanError"),
        ("toolspan.dashboard", "DashboardError"),
        ("toolspan.dashboard", "QueryRefused"),
        ("toolspan.dashboard._errors", "QueryTimeout"),
    ],
)
def test_each_part_re_exports_the_same_classes(public: str, name: str) -> None:
    assert getattr(importlib.import_module(public), name) is getattr(_errors, name)


def test_each_part_base_is_a_toolspan_error() -> None:
    from toolspan.analyzer import Analyzer, AnalyzerError
    from toolspan.dashboard import DashboardError
    from toolspan.tracer.store import StoreError

    for base in (AnalyzerError, DashboardError, StoreError):
        assert issubclass(base, ToolspanError)
    with pytest.raises(ToolspanError, match="read-only"):  # a real one, raised by the analyzer
        Analyzer(None, read_only=True)


def test_the_readme_links_the_tree() -> None:
    assert "common/_errors.py" in (REPO / "README.md").read_text(encoding="utf-8")
