"""The one loader of named statements: its file format, and every packaged file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan._sql import Statements, load_statements, parse_statements

REPO = Path(__file__).resolve().parents[2]
# Every statement file of the three parts, as (package, file relative to it).
PACKAGED = [
    (f"toolspan.{path.relative_to(REPO).parts[0]}", path)
    for part in ("tracer", "analyzer", "dashboard")
    for path in sorted((REPO / part).rglob("*"))
    if path.suffix in {".sql", ".lua"}
]


def test_sections_in_file_order_without_trailing_semicolons() -> None:
    text = (
        "-- What the file is for.\n\n"
        "-- name: first\n-- kept: a comment after the name line\nSELECT 1;\n\n"
        "-- name: second\nSELECT 2;;  \n"
    )
    assert parse_statements(text) == {
        "first": "-- kept: a comment after the name line\nSELECT 1",
        "second": "SELECT 2",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT 1;\n", "holds no '-- name:' sections"),
        ("SELECT 0;\n-- name: a\nSELECT 1;\n", "text before the first '-- name:' line"),
        ("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n", "two statements named 'a'"),
        ("-- name: a\n-- only a comment\n;\n-- name: b\nSELECT 2;\n", "statement 'a' is empty"),
        ("-- name: a-b\nSELECT 1;\n", "'a-b' is not a statement name"),
        ("-- name:\nSELECT 1;\n", "'' is not a statement name"),
    ],
)
def test_packaging_mistakes_fail_naming_the_file(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^broken\.sql") as raised:
        parse_statements(text, "broken.sql")
    assert message in str(raised.value)


names = st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True), unique=True, min_size=1)
bodies = st.from_regex(r"SELECT [0-9a-z ,'()*]{0,40}", fullmatch=True)


@given(names=names, data=st.data())
def test_what_is_written_is_what_is_loaded(names: list[str], data: st.DataObject) -> None:
    statements = {name: data.draw(bodies).rstrip() for name in names}
    text = "-- a file\n" + "".join(f"\n-- name: {n}\n{body};\n" for n, body in statements.items())
    loaded = parse_statements(text)
    assert loaded == statements
    assert list(loaded) == names


@pytest.mark.parametrize(("package", "path"), PACKAGED, ids=lambda p: getattr(p, "name", p))
def test_every_packaged_statement_file_loads(package: str, path: Path) -> None:
    relative = path.relative_to(REPO / package.split(".")[1]).as_posix()
    statements = load_statements(package, relative)
    assert isinstance(statements, Statements) and len(statements) >= 1
    assert load_statements(package, relative) is statements  # read once


def test_every_part_keeps_its_statements_in_files() -> None:
    found = {package for package, _ in PACKAGED}
    assert found == {"toolspan.tracer", "toolspan.analyzer", "toolspan.dashboard"}


def test_unknown_name_says_which_file_and_what_it_has() -> None:
    statements = load_statements("toolspan.analyzer", "sql/session.sql")
    with pytest.raises(KeyError, match=r"toolspan/analyzer/sql/session.sql has no statement 'x'"):
        statements["x"]
    assert "begin" in repr(statements)


def test_the_loader_imports_no_database_driver() -> None:
    probe = (
        "import sys, toolspan._sql; "
        "print(sorted({'duckdb', 'redis', 'sqlite3'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
