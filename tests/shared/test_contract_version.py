"""The trace contract's version is stated once in code and once in the document, alike,
and a version the code announces is listed in the CHANGELOG."""

from __future__ import annotations

import re
from pathlib import Path

from toolspan.tracer import CONTRACT_VERSION

REPO = Path(__file__).resolve().parents[2]


def test_the_document_states_the_codes_version() -> None:
    text = (REPO / "docs" / "trace-contract.md").read_text(encoding="utf-8")
    stated = re.search(r"^Version \*\*(\d+)\*\*", text, re.MULTILINE)
    assert stated is not None, "docs/trace-contract.md no longer states its version"
    assert int(stated.group(1)) == CONTRACT_VERSION


def test_the_changelog_lists_the_current_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"trace contract[^\n]*\bversion {CONTRACT_VERSION}\b", changelog, re.I)
