"""Trace text in `toolspan analyze` and `toolspan sql` output: shown literally,
never as new rows, Markdown structure or terminal escapes (issue 28)."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.analyzer import _render
from toolspan.cli import main

from .conftest import Recorder

HOSTILE = (
    "c-1\n| forged | row |\n## Heading\x1b[2J\x1b]8;;http://evil\x07"
    "[click](http://evil) <img src=x> **bold** \u202eevil"
)


def _traces(tmp_path: Path) -> str:
    rec = Recorder()
    with rec.conversation(HOSTILE):
        for _ in range(3):  # a loop: the same call and answer three times
            rec.toolspan_call("search*[x]", HOSTILE, {"q": "x"}, result=["a"])
    rec.write(tmp_path / "traces.jsonl", rec.take())
    return str(tmp_path)


def test_markdown_and_table_output_carry_no_control_characters_or_structure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _traces(tmp_path)
    assert main(["analyze", folder, "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "\x1b" not in markdown and "\x07" not in markdown and "\u202e" not in markdown
    rows = [line for line in markdown.splitlines() if "c-1" in line]
    (row,) = rows  # one finding, one line: the newlines did not start rows
    assert row.startswith("| loop | ") and row.count(" | ") == 6  # 7 cells, none forged
    for structure in ("[click]", " <img", "**bold**", "| forged |"):
        assert structure not in row
    assert "\\[click\\]" in row and "\\<img" in row and "\\*\\*bold\\*\\*" in row
    assert main(["analyze", folder]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\x07" not in text
    assert len([line for line in text.splitlines() if "c-1" in line]) == 1
    assert main(["sql", "SELECT conversation_id FROM tool_calls LIMIT 1", folder]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\n| forged" in out


def test_ordinary_names_stay_readable() -> None:
    assert _render.markdown_text("create_user") == "create_user"
    assert _render.markdown_text("c-unsafe 3x, wasted 12 ms") == "c-unsafe 3x, wasted 12 ms"
    assert _render.visible("plain text") == "plain text"


@given(st.lists(st.text(), min_size=1, max_size=4))
def test_any_text_stays_in_its_cell(cells: list[str]) -> None:
    rendered = _render.table([f"c{i}" for i in range(len(cells))], [cells], markdown=True)
    _head, _rule, row = rendered.split("\n")  # no text makes another line
    assert row.startswith("| ") and row.endswith(" |")
    unescaped_pipes = len(row.replace("\\\\", "").replace("\\|", "")) - len(
        row.replace("\\\\", "").replace("\\|", "").replace("|", "")
    )
    assert unescaped_pipes == len(cells) + 1
    assert not any(_hidden(char) for char in row)
    plain = _render.table(["c"], [[cells[0]]])
    assert len(plain.split("\n")) == 3 and not any(_hidden(c) for c in plain.replace("\n", ""))


def _hidden(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")
