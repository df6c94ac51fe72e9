"""docs/analyzer.md's Instrumentations table and the recorded fixtures agree.

Every stack folder under tests/analyzer/instrumentations/ must have a row, and
every folder a row claims must exist: the table never promises a recording
that is not there, nor hides one that is.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "analyzer.md"
FIXTURES = Path(__file__).parent / "instrumentations"
HEADING = "## Instrumentations"


def _rows() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    assert HEADING in text, f"{DOC} has no {HEADING!r} section"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    # The header and its separator are not rows.
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]


def _claimed(rows: list[list[str]]) -> set[str]:
    """The folder names (in backticks) in each row's last column."""
    return {name for row in rows for name in re.findall(r"`([^`]+)`", row[-1])}


def _folders() -> set[str]:
    return {p.name for p in FIXTURES.iterdir() if (p / "labels.json").is_file()}


def test_every_fixture_folder_has_a_row() -> None:
    missing = _folders() - _claimed(_rows())
    assert not missing, f"no row in {DOC.name}#instrumentations for {sorted(missing)}"


def test_every_fixture_a_row_claims_exists() -> None:
    absent = _claimed(_rows()) - _folders()
    assert not absent, f"rows claim fixtures that do not exist: {sorted(absent)}"


def test_a_row_without_a_fixture_says_so() -> None:
    for row in _rows():
        fixture = row[-1]
        assert "`" in fixture or fixture == "not recorded yet" or fixture.startswith("tests/"), row
