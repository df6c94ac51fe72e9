"""Issue 6 end to end: the example agent, the sample traces, the analyzer."""

from __future__ import annotations

import filecmp
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from examples.runner import main as run_example
from sample_traces.__main__ import regenerate
from sample_traces.agent_run import CONVERSATIONS, WRITE_TOOLS
from toolspan.analyzer import Analyzer
from toolspan.dashboard import open_database
from toolspan.dashboard._queries import Filters, run_query
from toolspan.tracer.testing import FakeClock

REPO = Path(__file__).resolve().parents[2]
CHECKED_IN = REPO / "sample_traces"


def found(paths: list[Path], write_tools: tuple[str, ...] = ()) -> Counter[tuple[str, str, str]]:
    with Analyzer() as analyzer:
        report = analyzer.ingest(paths)
        assert report.bad_lines == ()
        analyzer.set_write_tools(write_tools)
        return Counter((f.kind, f.conversation_id, f.tool or "") for f in analyzer.findings())


def test_checked_in_sample_traces_are_what_the_generator_makes_now(tmp_path):
    regenerate(tmp_path)
    for name in (
        "bicycle/cases.csv",
        "bicycle/attempts.csv",
        "bicycle/results.csv",
        "bicycle/traces.jsonl",
        "agent_run/traces.jsonl",
        "outage/traces.jsonl",
    ):
        assert filecmp.cmp(tmp_path / name, CHECKED_IN / name, shallow=False), (
            f"{name} drifted: run `make sample-traces` and commit the result"
        )


def test_analyzer_finds_exactly_the_planted_problems(tmp_path):
    regenerate(tmp_path)
    planted = Counter(
        (kind, conversation.conversation_id, tool)
        for conversation in CONVERSATIONS
        for kind, tool in conversation.planted
    )
    assert found([tmp_path / "agent_run"], WRITE_TOOLS) == planted
    assert found([tmp_path / "bicycle"]) == Counter()  # retries, but nothing wrong


def test_the_outage_sample_fills_the_services_panel(tmp_path):
    """`make demo` shows the retry budget and circuit breaker panel: the outage's calls
    carry a service, some retries were refused and some calls failed fast."""
    regenerate(tmp_path)
    assert found([tmp_path / "outage"]) == Counter()  # reads, each a different order
    db = tmp_path / "outage.duckdb"
    with Analyzer(db) as analyzer:
        analyzer.ingest([tmp_path / "outage"])
    panel = run_query(
        open_database(db),
        "overview_services",
        {**Filters().params(), "bucket": timedelta(minutes=1)},
    )
    assert set(panel["service"]) == {"carrier"}
    assert panel["refused"].sum() > 0 and panel["failed_fast"].sum() > 0
    assert panel["saw_open"].sum() > 0 and panel["retries"].sum() > 0
    # Every attempt is traceable by the request it served, as the contract lists.
    with Analyzer(db) as analyzer:
        ((calls, keyed),) = analyzer.query(
            "SELECT count(*), count(DISTINCT request_id) FILTER (WHERE turn_id IS NOT NULL) "
            "FROM tool_calls"
        ).rows
        ((orphans,),) = analyzer.query(
            "SELECT count(*) FROM attempts a JOIN tool_calls c "
            "ON a.call_span_id = c.span_id AND a.trace_id = c.trace_id WHERE c.request_id IS NULL"
        ).rows
    assert calls > 0 and keyed == calls and orphans == 0


def test_without_write_tools_the_mis_declared_sms_goes_unseen(tmp_path):
    regenerate(tmp_path)
    kinds = {kind for kind, _, _ in found([tmp_path / "agent_run"])}
    assert "unsafe_retry" not in kinds


EXAMPLES = ["openai", "anthropic", "openai_responses", "mcp"]


@pytest.mark.parametrize("shape", EXAMPLES)
def test_example_agent_end_to_end(tmp_path, shape, capsys, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    out = tmp_path / f"{shape}.jsonl"
    assert run_example(shape, ["--out", str(out)], clock=FakeClock()) == 0
    printed = capsys.readouterr().out
    # Every write happened exactly once despite the lost responses.
    assert "'refund:A-1001': 1" in printed and "'cancel:A-1002': 1" in printed
    assert "'email:rider@example.com:Refund issued': 1" in printed
    assert found([out]) == Counter({("loop", f"example-{shape}", "track_shipment"): 1})
    spans = [
        span
        for line in out.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    names = {span["name"] for span in spans}
    assert {
        "invoke_agent support-desk",
        "chat scripted-model",
        "execute_tool refund_order",
        "attempt 2 refund_order",
    } <= names
    outcomes = Counter(
        (_attribute(span, "gen_ai.tool.name"), _attribute(span, "toolspan.status"))
        for span in spans
        if span["name"].startswith("execute_tool ")
    )
    # The scenario's three retry cases, as the issue lists them.
    assert outcomes[("get_order", "succeeded")] == 1
    assert outcomes[("refund_order", "succeeded")] == 1
    assert outcomes[("send_email", "unsafe_retry")] == 1
    attempts = Counter(
        _attribute(span, "gen_ai.tool.name")
        for span in spans
        if span["name"].startswith("attempt ")
    )
    assert (attempts["get_order"], attempts["refund_order"], attempts["send_email"]) == (2, 2, 1)


def test_all_examples_together_have_no_duplicate_write(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    for shape in EXAMPLES:
        assert run_example(shape, ["--out", str(tmp_path / f"{shape}_agent.jsonl")],
                           clock=FakeClock()) == 0  # fmt: skip
    kinds = Counter(kind for kind, _, _ in found([tmp_path], ("refund_*", "send_*", "cancel_*")))
    assert kinds == Counter({"loop": len(EXAMPLES)})


def _attribute(span: dict, key: str) -> object:
    for item in span.get("attributes", []):
        if item["key"] == key:
            return next(iter(item["value"].values()))
    return None
