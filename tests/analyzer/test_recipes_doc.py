"""docs/analyzer.md's Recipes: every query runs on the sample traces and answers.

The sample traces hold each case a recipe asks about (a duplicate e-mail,
429s with Retry-After, retried calls, unkeyed writes), so an empty answer means
the recipe (or a view it reads) broke.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from toolspan.analyzer import Analyzer

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "analyzer.md"
SAMPLES = [ROOT / "sample_traces" / name for name in ("bicycle", "agent_run", "outage")]


def _recipes() -> list[str]:
    section = DOC.read_text(encoding="utf-8").split("## Recipes", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sql\n(.*?)```", section, re.S)


def test_the_recipes_section_has_the_questions_users_ask() -> None:
    assert len(_recipes()) >= 4


@pytest.mark.parametrize("sql", _recipes(), ids=lambda q: q.split("FROM")[1].split()[0])
def test_each_recipe_answers_on_the_sample_traces(sql: str) -> None:
    with Analyzer() as az:
        az.ingest(SAMPLES)
        result = az.query(sql)
    assert result.rows, sql


def test_a_recipe_runs_as_written_with_toolspan_sql(tmp_path: Path) -> None:
    # From another directory, as the doc says to run them.
    sql = _recipes()[0]
    done = subprocess.run(
        [sys.executable, "-m", "toolspan.cli", "sql", "--format", "json", sql,
         *map(str, SAMPLES)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "duplicate_write" in done.stdout and "send_email" in done.stdout
