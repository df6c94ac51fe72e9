"""The pages are written against a small public surface: toolspan.dashboard.ui
and the package itself, never the dashboard's private modules."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from toolspan import dashboard
from toolspan.dashboard import ui

PAGES = sorted(
    p
    for p in (Path(dashboard.__file__).parent / "_pages").glob("*.py")
    if not p.name.startswith("_")
)


def _toolspan_imports(path: Path) -> list[str]:
    """Every ``toolspan...`` name the file imports, as ``module:name``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolspan"):
            found += [f"{node.module}:{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("toolspan")]
    return found


def test_there_are_pages() -> None:
    assert {p.stem for p in PAGES} >= {"overview", "timelines", "findings", "trace", "console"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_a_page_imports_only_public_names(page: Path) -> None:
    imported = _toolspan_imports(page)
    assert "toolspan.dashboard:ui" in imported
    private = [name for name in imported if any(part.startswith("_") for part in name.split("."))]
    private += [n for n in imported if n.split(":")[-1].startswith("_")]
    assert private == []
    for name in imported:
        module, _, attribute = name.partition(":")
        if module == "toolspan.dashboard":
            assert attribute in dashboard.__all__ or attribute == "ui", name


@pytest.mark.parametrize("name", ui.__all__)
def test_the_surface_is_exported_and_documented(name: str) -> None:
    member = getattr(ui, name)
    assert name in (ui.__doc__ or ""), f"{name} is not described in ui's docstring"
    if callable(member):
        assert inspect.getdoc(member), f"{name} has no docstring"
