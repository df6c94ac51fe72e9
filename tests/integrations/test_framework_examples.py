"""The three framework examples end to end: real agent loops, their traces, the analyzer."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from examples.frameworks import main
from toolspan.analyzer import Analyzer
from toolspan.cli import main as toolspan_cli
from toolspan.tracer.testing import FakeClock

EXAMPLES = {
    "openai_agents": "openai_agents_agent",
    "pydantic_ai": "pydantic_ai_agent",
    "langchain": "langchain_agent",
}


def run_example(name: str, out: Path) -> tuple[str, FakeClock]:
    module = importlib.import_module(f"examples.{EXAMPLES[name]}")
    clock = FakeClock()
    assert main(name, module.run, ["--out", str(out)], clock=clock) == 0
    return out.read_text(), clock


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_settles_every_write_once(tmp_path, name, capsys, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    out = tmp_path / f"{EXAMPLES[name]}.jsonl"
    run_example(name, out)
    printed = capsys.readouterr().out
    effects = json.loads(printed.split("side effects: ", 1)[1].splitlines()[0])
    assert effects == {
        "cancel:A-1002": 1,
        "email:rider@example.com:Refund issued": 1,
        "refund:A-1001": 1,
    }
    assert "Refunded 49.00" in printed  # the run reached the model's answer
    with Analyzer() as analyzer:
        analyzer.ingest([out])
        calls = analyzer.query(
            "SELECT tool, status, attempts, replayed, read_back, idempotency_key IS NOT NULL"
            " FROM tool_calls WHERE source = 'toolspan' ORDER BY ALL"
        ).rows
        findings = analyzer.findings()
    assert calls == [
        ("cancel_order", "succeeded", 1, False, "found", False),  # settled by read-back
        ("get_order", "succeeded", 2, False, None, False),  # a 503, then the order
        ("refund_order", "succeeded", 0, True, None, True),  # the re-plan, replayed
        ("refund_order", "succeeded", 2, False, None, True),  # lost response, keyed retry
        ("send_email", "unsafe_retry", 1, False, None, False),  # lost response, not repeated
    ]
    assert findings == []


def test_toolspan_analyze_finds_no_duplicate_write_in_the_three(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    out = tmp_path / "out"
    for name, module in EXAMPLES.items():
        run_example(name, out / f"{module}.jsonl")
    capsys.readouterr()
    assert toolspan_cli(["analyze", str(out), "--fail-on", "any"]) == 0
    report = capsys.readouterr().out
    assert "conversations             3" in report
