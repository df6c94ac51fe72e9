"""The retry-safety findings (key_churn, write_after_unknown, retried_permanent,
parallel_write) and every benign look-alike of issue 11, on labelled traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolspan.analyzer import Analyzer, Finding
from toolspan.cli import main

from .retry_traces import write_retry_traces

NEW_KINDS = (
    "key_churn",
    "write_after_unknown",
    "retried_permanent",
    "parallel_write",
    "unverified_keyed_retry",
)
OLD_KINDS = ("loop", "duplicate_write", "idempotency_conflict", "unsafe_retry")


@pytest.fixture
def retry_scenario(tmp_path: Path) -> dict[str, Any]:
    return write_retry_traces(tmp_path)


def _found(directory: Path, write_tools: tuple[str, ...] = ()) -> list[Finding]:
    with Analyzer() as az:
        az.ingest([directory])
        if write_tools:
            az.set_write_tools(write_tools)
        return az.findings()


def _of(findings: list[Finding], kind: str) -> dict[str, list[Finding]]:
    by_conversation: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.kind == kind:
            by_conversation.setdefault(finding.conversation_id, []).append(finding)
    return by_conversation


def test_key_churn(retry_scenario: dict[str, Any]) -> None:
    findings = _found(retry_scenario["dir"])
    churn = _of(findings, "key_churn")
    assert set(churn) == {"c-churn", "c-churn-no-request"}
    (found,) = churn["c-churn"]
    assert (found.tool, found.idempotency_key, found.count) == ("create_refund", None, 3)
    assert list(found.span_ids) == retry_scenario["churn"]
    assert found.detail["keys"] == ["k-0", "k-1", "k-2"]
    assert found.detail["request_id"] == "r1"
    assert found.detail["explanation"] == (
        "3 writes of create_refund with the same arguments ran under 3 different idempotency "
        "keys: derive the key once per logical action and reuse it on every retry."
    )
    (no_request,) = churn["c-churn-no-request"]
    assert no_request.detail["request_id"] is None
    assert list(no_request.span_ids) == retry_scenario["churn_no_request"]
    # A churned key is not a duplicate write: the keys differ.
    assert "c-churn" not in _of(findings, "duplicate_write")


def test_write_after_unknown(retry_scenario: dict[str, Any]) -> None:
    found = _of(_found(retry_scenario["dir"]), "write_after_unknown")
    assert set(found) == {"c-unknown", "c-connection"}
    (unknown,) = found["c-unknown"]
    assert (unknown.tool, unknown.count) == ("charge", 3)
    assert list(unknown.span_ids) == retry_scenario["unknown"]
    assert unknown.detail["error_code"] == "unknown_outcome"
    assert unknown.detail["repeats"] == 2
    assert "ran again 2 times without reading its effect back" in unknown.detail["explanation"]
    (connection,) = found["c-connection"]
    assert list(connection.span_ids) == retry_scenario["connection"]
    assert connection.count == 2


def test_write_after_unknown_on_genai_spans_once_the_write_tools_are_named(
    retry_scenario: dict[str, Any],
) -> None:
    # GenAI spans do not say whether they write: unknown until named.
    assert "c-genai-unknown" not in _of(_found(retry_scenario["dir"]), "write_after_unknown")
    found = _of(_found(retry_scenario["dir"], ("book_*",)), "write_after_unknown")
    (genai,) = found["c-genai-unknown"]
    assert (genai.tool, genai.count) == ("book_flight", 2)
    assert list(genai.span_ids) == retry_scenario["genai_unknown"]  # argument key order ignored
    assert genai.detail["error_code"] == "timeout"


def test_retried_permanent(retry_scenario: dict[str, Any]) -> None:
    found = _of(_found(retry_scenario["dir"]), "retried_permanent")
    assert set(found) == {"c-permanent"}
    by_tool = {f.tool: f for f in found["c-permanent"]}
    assert set(by_tool) == {"get_order", "update_order"}
    not_found = by_tool["get_order"]
    assert (not_found.count, not_found.span_ids) == (3, (retry_scenario["permanent_404"],))
    assert not_found.detail["attempt_outcomes"] == ["http_404"] * 3
    assert not_found.detail["explanation"].startswith(
        "get_order was attempted 3 times although attempt 1 failed with http_404"
    )
    bad_args = by_tool["update_order"]
    assert bad_args.detail["attempt_outcomes"] == ["http_503", "invalid_arguments", "ok"]
    assert bad_args.idempotency_key == "k-upd"
    assert "attempt 2 failed with invalid_arguments" in bad_args.detail["explanation"]


def test_parallel_write(retry_scenario: dict[str, Any]) -> None:
    found = _of(_found(retry_scenario["dir"]), "parallel_write")
    assert set(found) == {"c-parallel"}
    by_resource = {f.detail["resource_key"]: f for f in found["c-parallel"]}
    assert set(by_resource) == {"order-1", "order-2"}
    mixed = by_resource["order-1"]
    # The later, fourth write on order-1 overlaps nothing: not counted.
    assert (mixed.tool, mixed.count) == (None, 3)
    assert list(mixed.span_ids) == retry_scenario["parallel_mixed"]
    assert mixed.detail["tools"] == ["cancel_order", "refund_order"]
    assert mixed.detail["explanation"].startswith(
        "3 writes on resource order-1 (cancel_order, refund_order) ran at the same time"
    )
    same_tool = by_resource["order-2"]
    assert (same_tool.tool, same_tool.count) == ("refund_order", 2)
    assert list(same_tool.span_ids) == retry_scenario["parallel_same_tool"]


def test_unverified_keyed_retry(retry_scenario: dict[str, Any]) -> None:
    findings = _found(retry_scenario["dir"])
    (found, required, declared_false) = _of(findings, "unverified_keyed_retry")["c-keyed"]
    assert set(_of(findings, "unverified_keyed_retry")) == {"c-keyed"}
    assert (found.tool, found.idempotency_key, found.count) == ("refund_order", "kv-1", 3)
    assert list(found.span_ids) == [retry_scenario["keyed_timeout"]]
    assert found.detail["attempt_outcomes"] == ["timeout", "http_429", "ok"]
    assert found.detail["keys_honoured"] is None and found.detail["status"] == "succeeded"
    assert found.detail["explanation"] == (
        "refund_order ran again under idempotency key kv-1 after a failure that may have "
        "committed it, and nothing checked the effect: if the service ignores the key, the "
        "write ran twice. Give the tool a read_back, or check that the service honours keys "
        "(toolspan.tracer.testing.check_keys_honoured) and declare keys_honoured=True."
    )
    assert list(required.span_ids) == [retry_scenario["keyed_required"]]
    assert list(declared_false.span_ids) == [retry_scenario["keyed_false"]]
    assert declared_false.detail["keys_honoured"] == "false"
    # Succeeded with three attempts under one key: no other kind sees the double refund.
    assert "c-keyed" not in _of(findings, "duplicate_write")


def test_each_finding_explains_itself_and_nothing_else_is_found(
    retry_scenario: dict[str, Any],
) -> None:
    findings = _found(retry_scenario["dir"], ("book_*",))
    assert {f.kind for f in findings} == set(NEW_KINDS) | {"loop", "duplicate_write"}
    # The only findings of the first four kinds are real ones: the repeated
    # refund is also a loop (same answer 8 times), and the two unchecked
    # charges after the unknown outcome both succeeded without a key.
    assert {(f.kind, f.conversation_id, f.tool) for f in findings if f.kind in OLD_KINDS} == {
        ("loop", "c-churn", "create_refund"),
        ("duplicate_write", "c-unknown", "charge"),
    }
    for finding in findings:
        sentence = finding.detail["explanation"]
        assert sentence.endswith(".") and sentence.count(": ") == 1, sentence


def test_the_original_look_alikes_give_no_new_finding(scenario: dict[str, object]) -> None:
    # The labelled traces of the first four kinds: retried 503s and timeouts,
    # a failing loop of 404s (one attempt each), keyed replays, a failed repeat.
    assert {f.kind for f in _found(scenario["dir"])} == set(OLD_KINDS)  # type: ignore[arg-type]


def test_new_findings_in_the_view_the_macro_and_the_columns(retry_scenario: dict[str, Any]) -> None:
    with Analyzer() as az:
        az.ingest([retry_scenario["dir"]])
        api = [(f.kind, f.conversation_id, f.tool, f.count) for f in az.findings()]
        view = az.query("SELECT kind, conversation_id, tool, count FROM findings").rows
        macro = az.query(
            "SELECT kind, count(*) FROM toolspan_findings(2) GROUP BY kind ORDER BY kind"
        ).rows
        columns = az.query(
            "SELECT resource_key, read_back FROM tool_calls"
            " WHERE resource_key IS NOT NULL OR read_back IS NOT NULL"
            " GROUP BY ALL ORDER BY ALL"
        ).rows
    assert view == api
    # min_repeats 2 adds loops (the churned refund without a request id, the
    # two quotes, the two charges); the other rules do not depend on it.
    assert dict(macro) == {
        "duplicate_write": 1,
        "key_churn": 2,
        "loop": 4,
        "parallel_write": 2,
        "retried_permanent": 2,
        "unverified_keyed_retry": 3,
        "write_after_unknown": 2,
    }
    assert (None, "absent") in columns
    assert {key for key, _ in columns} >= {f"order-{n}" for n in range(1, 9)}


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_fail_on_accepts_each_new_kind(
    retry_scenario: dict[str, Any], kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(retry_scenario["dir"])
    assert main(["analyze", folder, "--fail-on", kind, "--write-tools", "book_*"]) == 1
    assert kind in capsys.readouterr().out


def test_new_findings_in_json_and_markdown(
    retry_scenario: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = str(retry_scenario["dir"])
    assert main(["analyze", folder, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    new = [f for f in out["findings"] if f["kind"] in NEW_KINDS]
    assert {f["kind"] for f in new} == set(NEW_KINDS)
    assert all(f["detail"]["explanation"] for f in new)
    assert main(["analyze", folder, "--format", "markdown", "--fail-on", "parallel_write"]) == 1
    markdown = capsys.readouterr().out
    assert "| parallel_write | c-parallel |  |" in markdown
    assert "| key_churn | c-churn | create_refund |" in markdown
