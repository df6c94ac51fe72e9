"""Every finding and every benign look-alike of the issue, on labelled traces."""

from __future__ import annotations

import json

import pytest

from toolspan.analyzer import Analyzer, Finding


def _by_kind(findings: list[Finding], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


def test_loops_are_found_and_look_alikes_are_not(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        loops = {(f.conversation_id, f.tool): f for f in _by_kind(az.findings(), "loop")}
    no_conv = scenario["no_conv_trace"]
    assert set(loops) == {
        ("c-loop", "search"),
        ("c-cycle", "open_page"),
        ("c-cycle", "go_back"),
        ("c-fail-loop", "fetch"),
        ("c-genai", "weather"),
        (no_conv, "lookup_sku"),
        ("s-oi", "wiki"),
    }
    loop = loops[("c-loop", "search")]
    assert loop.count == 3
    assert list(loop.span_ids) == scenario["loop"]
    assert len(loop.trace_ids) == 1
    assert loop.first_seen < loop.last_seen
    # Each call span lasts 23 ms (20 in the attempt, 1 ms clock ticks around it); two repeats.
    assert loop.detail["wasted_ms"] == pytest.approx(2 * 23.0)
    assert json.loads(loop.detail["arguments"]) == {"q": "x"}
    assert loops[("c-cycle", "open_page")].detail["cycle_tools"] == ["go_back", "open_page"]
    assert loops[("c-fail-loop", "fetch")].detail["answer"] == "http_404"
    assert loops[("c-genai", "weather")].count == 3


def test_min_repeats_changes_the_loop_threshold(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        loops2 = {(f.conversation_id, f.tool) for f in _by_kind(az.findings(min_repeats=2), "loop")}
        loops4 = _by_kind(az.findings(min_repeats=4), "loop")
    assert ("c-twice", "search") in loops2
    assert ("c-genai", "create_ticket") in loops2
    assert ("c-poll", "job_status") not in loops2  # progress: different results
    assert not any(c.startswith("c-across") for c, _ in loops2)
    assert ("c-retry", "search") not in loops2  # retries inside one call
    assert loops4 == []


def test_duplicate_writes(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        found = _by_kind(az.findings(), "duplicate_write")
        assert {(f.conversation_id, f.tool, f.idempotency_key) for f in found} == {
            ("c-write", "send_email", None),
            ("c-write", "pay", "k-pay"),
        }
        assert {f.span_ids for f in found} == {
            tuple(scenario["dup_unkeyed"]),  # type: ignore[arg-type]
            tuple(scenario["dup_keyed"]),  # type: ignore[arg-type]
        }
        # Foreign spans do not say they write until the user names the write tools.
        az.set_write_tools(["create_*"])
        found = _by_kind(az.findings(), "duplicate_write")
        assert ("c-genai", "create_ticket") in {(f.conversation_id, f.tool) for f in found}
        sides = az.query(
            "SELECT tool, any_value(side_effect) FROM tool_calls"
            " WHERE source = 'genai' GROUP BY tool"
        ).rows
        assert dict(sides) == {"weather": "none", "create_ticket": "write", "lookup_sku": "none"}
        az.set_write_tools([])
        assert az.query(
            "SELECT count(*) FROM tool_calls WHERE source <> 'toolspan' AND side_effect IS NOT NULL"
        ).rows == [(0,)]


def test_idempotency_conflicts_and_unsafe_retries(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        findings = az.findings()
    conflicts = _by_kind(findings, "idempotency_conflict")
    assert [(f.idempotency_key, f.tool, f.count) for f in conflicts] == [("k-book", "book", 2)]
    assert list(conflicts[0].span_ids) == scenario["conflict"]
    assert len(conflicts[0].detail["args_fingerprints"]) == 2
    unsafe = _by_kind(findings, "unsafe_retry")
    assert [(f.conversation_id, f.tool, f.count, f.span_ids) for f in unsafe] == [
        ("c-unsafe", "create_user", 2, (scenario["unsafe"],))
    ]
    assert unsafe[0].detail["attempt_outcomes"] == ["http_503", "ok"]


def test_findings_view_matches_the_api(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        api = [(f.kind, f.conversation_id, f.tool, f.count) for f in az.findings()]
        view = az.query("SELECT kind, conversation_id, tool, count FROM findings").rows
    assert view == api
    assert len(api) == 11


def test_tool_calls_come_from_tool_spans_only(scenario: dict[str, object]) -> None:
    with Analyzer() as az:
        az.ingest([scenario["dir"]])  # type: ignore[list-item]
        per_source = dict(az.query("SELECT source, count(*) FROM tool_calls GROUP BY source").rows)
        # toolspan: 3 + 2 + 4 + 1 + 3 + 6 + 3 + 2 + 2 + 2 + 1 + 2 + 2 + 2 + 3 calls.
        assert per_source == {"toolspan": 38, "genai": 8, "openinference": 3}
        assert az.query("SELECT count(*) FROM tool_calls WHERE tool IS NULL").rows == [(0,)]
        summary = az.summary()
    assert summary["calls"] == 49
    assert summary["retries"] == 3 + 1 + 1 + 2
    assert summary["statuses_by_tool"]["fetch"] == {"permanent_error": 3}
    assert summary["bad_lines"] == 0
