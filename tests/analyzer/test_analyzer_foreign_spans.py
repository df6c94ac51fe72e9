"""Tool spans as other instrumentations write them (docs/analyzer.md, the
instrumentation table), recorded with the real OpenTelemetry SDK in the shapes
those libraries use: arguments not recorded, failures told by exception events
and result shapes, Vercel AI SDK's ai.toolCall spans. Every case is analysed by
the DuckDB path and by ClickHouse (embedded chDB), with the same answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Status, StatusCode

from toolspan.analyzer import Analyzer, Finding

from .conftest import Recorder
from .test_analyzer_clickhouse import (  # noqa: F401  (fixtures used by name)
    Table,
    _assert_same,
    layout,
    table,
)

WRITES = ["send_*", "charge*"]


def _foreign_tool(
    rec: Recorder,
    name: str,
    attributes: dict[str, Any],
    *,
    scope: str,
    status: StatusCode | None = None,
    exception: dict[str, str] | None = None,
) -> None:
    """One tool span of another instrumentation: its attributes, its status,
    and an ``exception`` event as the SDK's record_exception writes one."""
    with rec.span(name, scope=scope, **attributes) as span:
        rec.tick(5)
        if exception is not None:
            span.add_event("exception", exception, timestamp=rec.tick(1))
        if status is not None:
            span.set_status(Status(status))


def _openinference(
    rec: Recorder, tool: str, input_value: str | None, output_value: str | None, **kw: Any
) -> None:
    attributes: dict[str, Any] = {"openinference.span.kind": "TOOL", "tool.name": tool}
    if input_value is not None:
        attributes["input.value"] = input_value
    if output_value is not None:
        attributes["output.value"] = output_value
    _foreign_tool(rec, tool, attributes, scope="openinference.instrumentation.langchain", **kw)


def _analyse(paths: list[Path]) -> tuple[dict[str, Any], list[Finding]]:
    with Analyzer() as az:
        az.set_write_tools(WRITES)
        az.ingest(paths)
        return az.summary(), az.findings()


def _kinds(findings: list[Finding]) -> set[tuple[str, str | None, str | None, int]]:
    return {(f.kind, f.conversation_id, f.tool, f.count) for f in findings}


# -- 1. unknown never equals unknown -------------------------------------------------


def _unrecorded_arguments(tmp_path: Path) -> Path:
    rec = Recorder()
    # OpenInference with content capture off: three e-mails to three people.
    with rec.span("agent", **{"session.id": "oi-off"}):
        for _ in range(3):
            _openinference(rec, "send_email", "__REDACTED__", "__REDACTED__")
    # GenAI semconv with capture off (the default): no arguments attribute at all.
    with rec.conversation("genai-off"):
        for _ in range(3):
            _foreign_tool(
                rec,
                "execute_tool send_email",
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_email"},
                scope="other.genai",
            )
    # Empty arguments text, three reads.
    with rec.span("agent", **{"session.id": "oi-empty"}):
        for _ in range(3):
            _openinference(rec, "search", "", "")
    # The control: the same e-mail recorded three times is a duplicate and a loop.
    with rec.span("agent", **{"session.id": "oi-on"}):
        for _ in range(3):
            _openinference(rec, "send_email", '{"to": "a@x"}', '"sent"')
    return Recorder.write(tmp_path / "unrecorded.jsonl", rec.take())


def test_calls_whose_arguments_were_not_recorded_are_never_alike(tmp_path: Path) -> None:
    summary, findings = _analyse([_unrecorded_arguments(tmp_path)])
    assert _kinds(findings) == {
        ("duplicate_write", "oi-on", "send_email", 3),
        ("loop", "oi-on", "send_email", 3),
    }
    assert summary["calls"] == 12
    assert summary["unverifiable"] == 9


@pytest.mark.parametrize("layout", ["map", "json"])
def test_unrecorded_arguments_on_clickhouse(table: Table, tmp_path: Path) -> None:  # noqa: F811
    path = _unrecorded_arguments(tmp_path)
    table.load(path)
    findings = _assert_same(table, [path], write_tools=WRITES)
    assert {f.conversation_id for f in findings} == {"oi-on"}


# -- 2. failures from status, exception events and result shapes -----------------


def _tool_message(content: str, call_id: str, status: str) -> str:
    """A LangChain ToolMessage as OpenInference serialises it into output.value."""
    return json.dumps(
        {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "messages", "ToolMessage"],
            "kwargs": {
                "content": content,
                "type": "tool",
                "tool_call_id": call_id,
                "status": status,
            },
        }
    )


TIMEOUT_FINDINGS = {
    ("write_after_unknown", "timeout", "charge", 3),
    ("write_after_unknown", "timeout", "charge", 2),
}


def _failures(tmp_path: Path) -> Path:
    rec = Recorder()
    charge = '{"amount": 40, "card": "c1"}'
    # A charge that timed out twice (status ERROR + exception event, no
    # error.type), then ran again with the same arguments.
    with rec.span("agent", **{"session.id": "timeout"}):
        for _ in range(2):
            _openinference(
                rec,
                "charge",
                charge,
                None,
                status=StatusCode.ERROR,
                exception={"exception.type": "TimeoutError", "exception.message": "timed out"},
            )
        _openinference(rec, "charge", charge, '{"id": "ch_1"}')
    # LangChain: a handled ToolException is span status OK, an exception event
    # with only a message, and a ToolMessage with status "error".
    with rec.span("agent", **{"session.id": "handled"}):
        for n in range(2):
            _openinference(
                rec,
                "charge",
                charge,
                _tool_message("card declined, try later", f"call_{n}", "error"),
                status=StatusCode.OK,
            )
        _openinference(rec, "charge", charge, _tool_message('{"id": "ch_2"}', "call_2", "success"))
    # A write that failed with an exception naming no type, then succeeded.
    with rec.span("agent", **{"session.id": "untyped"}):
        _openinference(rec, "charge", charge, None, exception={"exception.message": "boom"})
        _openinference(rec, "charge", charge, '{"id": "ch_3"}')
    return Recorder.write(tmp_path / "failures.jsonl", rec.take())


def test_failures_are_read_from_exception_events_and_tool_messages(tmp_path: Path) -> None:
    path = _failures(tmp_path)
    _, findings = _analyse([path])
    # Each timed-out charge ran again (the first twice, the second once).
    assert _kinds(findings) == TIMEOUT_FINDINGS
    assert {f.detail["error_code"] for f in findings} == {"TimeoutError"}
    with Analyzer() as az:
        az.ingest([path])
        statuses = az.query(
            "SELECT conversation_id, status, error_code, count(*) FROM tool_calls"
            " GROUP BY ALL ORDER BY ALL"
        ).rows
    assert statuses == [
        ("handled", "error", "tool_error", 2),
        ("handled", "succeeded", None, 1),
        ("timeout", "error", "TimeoutError", 2),
        ("timeout", "succeeded", None, 1),
        ("untyped", "error", "exception", 1),
        ("untyped", "succeeded", None, 1),
    ]


@pytest.mark.parametrize("layout", ["map", "json"])
def test_failures_on_clickhouse(table: Table, tmp_path: Path) -> None:  # noqa: F811
    path = _failures(tmp_path)
    table.load(path)
    findings = _assert_same(table, [path], write_tools=WRITES)
    assert _kinds(findings) == TIMEOUT_FINDINGS


# -- failures told only by the span status's message (OpenAI Agents SDK) ------------

AGENTS_TIMEOUT = (
    "Error running tool (non-fatal): {'tool_name': 'charge', 'error': 'gateway timed out'}"
)
AGENTS_REDACTED = (
    "Error running tool (non-fatal): {'tool_name': 'charge',"
    " 'error': 'Tool execution failed. Error details are redacted.'}"
)


def _agents_charge(rec: Recorder, failure: str | None) -> None:
    """An OpenAI Agents SDK function span through OpenInference: a failure is
    status ERROR with the SDK's description, no exception event, no error.type."""
    attributes = {"openinference.span.kind": "TOOL", "tool.name": "charge"}
    attributes["input.value"] = '{"order": "A1", "amount": 5}'
    scope = "openinference.instrumentation.openai_agents"
    with rec.span("charge", scope=scope, **attributes) as span:
        rec.tick(5)
        span.set_attribute("output.value", "failed" if failure else '{"charged": true}')
        span.set_status(Status(StatusCode.ERROR, failure) if failure else Status(StatusCode.OK))


def _status_failures(tmp_path: Path) -> Path:
    rec = Recorder()
    # The exception's message in the status: a timeout, then the same charge again.
    with rec.span("agent", **{"session.id": "told"}):
        _agents_charge(rec, AGENTS_TIMEOUT)
        _agents_charge(rec, None)
    # The SDK's default failure_error_function: the detail redacted, no timeout told.
    with rec.span("agent", **{"session.id": "redacted"}):
        _agents_charge(rec, AGENTS_REDACTED)
        _agents_charge(rec, None)
    return Recorder.write(tmp_path / "status.jsonl", rec.take())


def test_a_failure_told_only_by_the_status_message_is_read_from_it(tmp_path: Path) -> None:
    path = _status_failures(tmp_path)
    _, findings = _analyse([path])
    assert _kinds(findings) == {("write_after_unknown", "told", "charge", 2)}
    with Analyzer() as az:
        az.ingest([path])
        failed = az.query(
            "SELECT conversation_id, error_code FROM tool_calls WHERE status = 'error' ORDER BY 1"
        ).rows
    assert failed == [("redacted", AGENTS_REDACTED), ("told", AGENTS_TIMEOUT)]


@pytest.mark.parametrize("layout", ["map", "json"])
def test_status_message_failures_on_clickhouse(table: Table, tmp_path: Path) -> None:  # noqa: F811
    path = _status_failures(tmp_path)
    table.load(path)
    findings = _assert_same(table, [path], write_tools=WRITES)
    assert _kinds(findings) == {("write_after_unknown", "told", "charge", 2)}


# -- MLflow tracing: JSON-encoded attribute values, bound parameters ----------------


def _mlflow(rec: Recorder, tool: str, inputs: str, outputs: str, span_type: str = "TOOL") -> None:
    """A span of ``@mlflow.trace(span_type=...)``: MLflow JSON-encodes every
    attribute value (the span type is '"TOOL"'), the inputs are the function's
    bound parameters, the span is named after the function."""
    attributes = {
        "mlflow.spanType": json.dumps(span_type),
        "mlflow.spanFunctionName": json.dumps(tool),
        "mlflow.spanInputs": inputs,
        "mlflow.spanOutputs": outputs,
    }
    _foreign_tool(rec, tool, attributes, scope="mlflow.tracing.provider")


MLFLOW_FINDINGS = {
    ("duplicate_write", "wrapped", "send_email", 3),
    ("loop", "wrapped", "send_email", 3),
    ("loop", "text", "get_order", 3),
}


def _mlflow_shapes(tmp_path: Path) -> Path:
    rec = Recorder()
    # send_email(to=...), send_email(**kwargs) and send_email(*args, **kwargs),
    # called with the same arguments: one e-mail sent three times. The 2.0 as
    # written: an engine re-serialising the envelope would write 2.
    with rec.span("agent", **{"session.id": "wrapped"}):
        for inputs in (
            '{"to": "a@x", "n": 2.0}',
            '{"kwargs": {"to": "a@x", "n": 2.0}}',
            '{"args": [], "kwargs": {"to": "a@x", "n": 2.0}}',
        ):
            _mlflow(rec, "send_email", inputs, '"sent"')
    # A positional argument is not the model's arguments' envelope: two e-mails.
    with rec.span("agent", **{"session.id": "positional"}):
        _mlflow(rec, "send_email", '{"kwargs": {"to": "a@x"}}', '"sent"')
        _mlflow(rec, "send_email", '{"args": ["b@x"], "kwargs": {"to": "a@x"}}', '"sent"')
    # A text input is JSON-encoded ('"A1"'): the same as OpenInference's bare A1.
    with rec.span("agent", **{"session.id": "text"}):
        _mlflow(rec, "get_order", '"A1"', '"shipped"')
        _mlflow(rec, "get_order", '"A1"', '"shipped"')
        _openinference(rec, "get_order", "A1", "shipped")
    # The documented redaction hook's placeholder, JSON-encoded: not recorded.
    # And spans of other MLflow types are no tool calls.
    with rec.span("agent", **{"session.id": "redacted"}):
        for _ in range(3):
            _mlflow(rec, "send_email", '"[REDACTED]"', '"[REDACTED]"')
            _mlflow(rec, "charge", '{"amount": 5}', "null", span_type="LLM")
    return Recorder.write(tmp_path / "mlflow.jsonl", rec.take())


def test_mlflow_arguments_fingerprint_as_the_tools_arguments(tmp_path: Path) -> None:
    path = _mlflow_shapes(tmp_path)
    summary, findings = _analyse([path])
    assert _kinds(findings) == MLFLOW_FINDINGS
    assert summary["calls"] == 11
    assert summary["unverifiable"] == 3
    with Analyzer() as az:
        az.ingest([path])
        rows = az.query(
            "SELECT source, arguments, count(DISTINCT args_fingerprint) FROM tool_calls"
            " WHERE conversation_id = 'text' GROUP BY ALL ORDER BY ALL"
        ).rows
    assert rows == [("mlflow", "A1", 1), ("openinference", "A1", 1)]


@pytest.mark.parametrize("layout", ["json"])
def test_mlflow_shapes_on_clickhouse(table: Table, tmp_path: Path) -> None:  # noqa: F811
    # The JSON layout only: the recorded fixtures check the Map one (test_instrumentations).
    path = _mlflow_shapes(tmp_path)
    table.load(path)
    findings = _assert_same(table, [path], write_tools=WRITES)
    assert _kinds(findings) == MLFLOW_FINDINGS
