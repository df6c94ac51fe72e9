"""Every Python snippet of docs/*.md runs as written (docs/testing.md has its own test).

A snippet is run in a fresh directory, after a prelude that gives it what the
page says comes from the reader's program (their tool functions, their
service): never code that changes what the snippet does. The snippets of one
page run in order in one namespace, as a reader follows the page. One that
needs what a test machine lacks is listed in NOT_RUN with where the same code
is tested instead.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
SAMPLES = ROOT / "sample_traces" / "bicycle"

# What the reader's program has before the page's snippets: per page.
PRELUDES: dict[str, str] = {
    "analyzer.md": "",
    "dashboard.md": (
        "from toolspan.analyzer import Analyzer\n"
        "with Analyzer('traces.duckdb') as az:\n"
        "    az.ingest(['traces/'])\n"
    ),
    "durability.md": (
        # The reader's refund function and their staging service, which dedupes by key.
        "class Staging:\n"
        "    def __init__(self):\n"
        "        self.by_key = {}\n"
        "    def refunds(self, order_id):\n"
        "        return [o for o in self.by_key.values() if o == order_id]\n"
        "staging = Staging()\n"
        "def refund_order(order_id: str, amount_cents: int, idempotency_key: str) -> dict:\n"
        "    staging.by_key.setdefault(idempotency_key, order_id)\n"
        "    return {'order_id': order_id}\n"
    ),
    "retry-budget.md": "def charge_card(card: str, amount_cents: int) -> dict:\n"
    "    return {'charged': amount_cents}\n"
    "charge_fn = charge_card\n",
}
# Pages whose snippet(s) cannot run here, and where the same code is tested.
NOT_RUN: dict[str, str] = {
    "clickhouse.md": "a ClickHouse server at ch.internal; the same ClickHouseAnalyzer calls on "
    "chDB: tests/analyzer/test_analyzer_clickhouse.py",
}


def _pages() -> dict[str, list[str]]:
    found = {}
    for path in sorted(DOCS.glob("*.md")):
        blocks = BLOCK.findall(path.read_text(encoding="utf-8"))
        if blocks and path.name != "testing.md":
            found[path.name] = blocks
    return found


def test_every_page_with_python_is_run_or_says_why_not() -> None:
    assert set(_pages()) == set(PRELUDES) | set(NOT_RUN)


@pytest.mark.parametrize("page", sorted(PRELUDES))
def test_the_pages_snippets_run_as_written(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copytree(SAMPLES, tmp_path / "traces")
    namespace: dict[str, Any] = {"__name__": f"docs_{page.removesuffix('.md')}"}
    exec(compile(PRELUDES[page], f"<prelude of {page}>", "exec"), namespace)
    for n, block in enumerate(_pages()[page], 1):
        exec(compile(block, f"docs/{page} snippet {n}", "exec"), namespace)
    # A snippet that defines tests (the contract test) is the reader's suite: run it.
    for name, value in list(namespace.items()):
        if name.startswith("test_") and callable(value):
            value()


def test_every_setup_telemetry_keyword_the_docs_name_exists() -> None:
    # Inline mentions such as `setup_telemetry(..., json_path=...)` are code too.
    import inspect

    from toolspan.tracer import setup_telemetry

    texts = [p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *DOCS.glob("*.md")]]
    named = {m for text in texts for m in re.findall(r"setup_telemetry\(\.\.\., (\w+)=", text)}
    assert named, "the docs name no setup_telemetry keyword: the pattern is stale"
    assert named <= set(inspect.signature(setup_telemetry).parameters)
