"""The model's requested tool calls as evidence (issue 39): where no tool span
was recorded (a plain LLM client instrumented by OpenInference or OpenLLMetry),
the tool calls an LLM span's output messages request are calls of source
'requested'; where a tool span was recorded, the request is that call, counted
once. Strands Agents' tool spans, whose arguments and result are only in span
events, are read from those events. Spans are written with the real
OpenTelemetry SDK and its OTLP/JSON file exporter; every scenario is also
analysed by ClickHouse (embedded chDB) in both exporter layouts, from the raw
spans and from `clickhouse init`'s copies, with the DuckDB path's answers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import Status, StatusCode

from toolspan.analyzer import Analyzer, Finding

from .conftest import Recorder
from .test_analyzer_clickhouse import (  # noqa: F401  (fixtures used by name)
    LAYOUTS,
    READS,
    Table,
    _assert_same,
    layout,
    table,
)

WRITES = ["send_*", "charge*"]
Request = tuple[str, dict[str, Any], str | None]  # (tool, arguments, call id)


def _openinference_llm(
    rec: Recorder, requests: Sequence[Request], echoed: Sequence[Request] = (), **extra: Any
) -> None:
    """An OpenInference LLM span (openinference-instrumentation-openai): the
    response's tool calls flattened into llm.output_messages.0.*, the earlier
    requests echoed in llm.input_messages.* (the conversation so far)."""
    attributes: dict[str, Any] = {"openinference.span.kind": "LLM", **extra}
    attributes["llm.output_messages.0.message.role"] = "assistant"
    for j, (tool, args, call_id) in enumerate(requests):
        prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
        attributes[prefix + "function.name"] = tool
        attributes[prefix + "function.arguments"] = json.dumps(args)
        if call_id is not None:
            attributes[prefix + "id"] = call_id
    for i, (tool, args, call_id) in enumerate(echoed, start=1):
        prefix = f"llm.input_messages.{i}.message.tool_calls.0.tool_call."
        attributes[prefix + "function.name"] = tool
        attributes[prefix + "function.arguments"] = json.dumps(args)
        attributes[prefix + "id"] = call_id or ""
    with rec.span("ChatCompletion", scope="openinference.instrumentation.openai", **attributes):
        rec.tick(5)


def _parts(requests: Sequence[Request]) -> list[dict[str, Any]]:
    return [
        {"type": "tool_call", "name": tool, "arguments": args, **({"id": i} if i else {})}
        for tool, args, i in requests
    ]


def _openllmetry_llm(
    rec: Recorder, requests: Sequence[Request], echoed: Sequence[Request] = (), **extra: Any
) -> None:
    """An OpenLLMetry chat span (opentelemetry-instrumentation-openai 0.62):
    GenAI semconv gen_ai.output.messages, the conversation so far in
    gen_ai.input.messages."""
    output = [{"role": "assistant", "parts": _parts(requests), "finish_reason": "tool_call"}]
    history = [{"role": "user", "parts": [{"type": "text", "content": "help"}]}]
    history += [{"role": "assistant", "parts": _parts([r])} for r in echoed]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(history),
        "gen_ai.output.messages": json.dumps(output),
        **extra,
    }
    with rec.span("openai.chat", scope="opentelemetry.instrumentation.openai.v1", **attributes):
        rec.tick(5)


def _genai_tool(rec: Recorder, tool: str, args: dict[str, Any], call_id: str | None) -> None:
    """The tool span of an instrumented tool (GenAI execute_tool)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": json.dumps(args),
        "gen_ai.tool.call.result": '"ok"',
    }
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    with rec.span(f"execute_tool {tool}", scope="other.genai", **attributes):
        rec.tick(5)


def _strands_tool(
    rec: Recorder,
    tool: str,
    content: str,
    result: str,
    call_id: str,
    *,
    error: str | None = None,
) -> None:
    """A Strands Agents 1.62 execute_tool span: arguments and result only in
    its gen_ai.tool.message and gen_ai.choice events."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.system": "strands-agents",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.status": "error" if error else "success",
    }
    with rec.span(f"execute_tool {tool}", scope="strands.telemetry.tracer", **attributes) as span:
        span.add_event(
            "gen_ai.tool.message",
            {"role": "tool", "content": content, "id": call_id},
            timestamp=rec.tick(1),
        )
        span.add_event("gen_ai.choice", {"message": result, "id": call_id}, timestamp=rec.tick(1))
        if error:
            span.add_event("exception", {"exception.type": error}, timestamp=rec.tick(1))
            span.set_status(Status(StatusCode.ERROR, error))


def _analyse(path: Path) -> tuple[list[tuple[Any, ...]], list[Finding]]:
    with Analyzer() as az:
        az.set_write_tools(WRITES)
        az.ingest([path])
        calls = az.query(
            "SELECT tool, source, status, count(*) FROM tool_calls GROUP BY ALL ORDER BY ALL"
        ).rows
        return calls, az.findings()


def _loops(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.kind == "loop"]


# -- requested calls alone ------------------------------------------------------------


def _identical_requests(tmp_path: Path, count: int = 200) -> Path:
    """A model that asks for get_order(A1) ``count`` times, each time after
    getting the answer (OpenInference; the tools are not instrumented)."""
    rec = Recorder()
    with rec.span("agent", **{"session.id": "c-loop"}):
        for n in range(count):
            _openinference_llm(rec, [("get_order", {"order_id": "A1"}, f"call_{n}")])
    return Recorder.write(tmp_path / "loop.jsonl", rec.take(), batch=50)


def test_identical_requests_are_one_loop_that_says_the_model_requested_them(
    tmp_path: Path,
) -> None:
    calls, findings = _analyse(_identical_requests(tmp_path))
    assert calls == [("get_order", "requested", "requested", 200)]
    [loop] = findings
    assert (loop.kind, loop.tool, loop.count) == ("loop", "get_order", 200)
    assert loop.detail["explanation"].startswith(
        "The model requested get_order 200 times with the same arguments"
    )
    assert (loop.detail["requested"], loop.detail["executions"], loop.detail["replays"]) == (
        200,
        0,
        0,
    )
    assert loop.detail["attempts"] == 0
    assert json.loads(loop.detail["arguments"]) == {"order_id": "A1"}


def test_requested_calls_are_not_failed_calls_of_their_conversation(tmp_path: Path) -> None:
    with Analyzer() as az:
        az.ingest([_identical_requests(tmp_path, count=4)])
        rows = az.query("SELECT conversation_id, calls, attempts, failed_calls FROM conversations")
    assert rows.rows == [("c-loop", 4, 0, 0)]


def test_requests_with_varied_arguments_are_no_loop(tmp_path: Path) -> None:
    rec = Recorder()
    with rec.span("agent", **{"session.id": "c-varied"}):
        for n in range(20):
            _openinference_llm(rec, [("get_order", {"order_id": f"A{n}"}, f"call_{n}")])
        for n in range(20):
            _openllmetry_llm(rec, [("send_email", {"to": f"p{n}@x"}, f"mail_{n}")])
    calls, findings = _analyse(Recorder.write(tmp_path / "varied.jsonl", rec.take()))
    assert calls == [
        ("get_order", "requested", "requested", 20),
        ("send_email", "requested", "requested", 20),
    ]
    assert findings == []


def test_echoed_input_messages_are_not_counted_again(tmp_path: Path) -> None:
    # Each LLM span echoes every earlier request in its input messages, as the
    # conversation is sent again: only the output messages are the new request.
    rec = Recorder()
    with rec.span("agent", **{"session.id": "c-echo"}):
        asked: list[Request] = []
        for n in range(2):
            request: Request = ("get_order", {"order_id": "A1"}, f"oi_{n}")
            _openinference_llm(rec, [request], echoed=asked)
            asked.append(request)
        asked = []
        for n in range(2):
            request = ("charge", {"order": "A1", "amount": 5}, f"ll_{n}")
            _openllmetry_llm(rec, [request], echoed=asked)
            asked.append(request)
        # The last answer requests nothing new, and echoes all of them.
        _openllmetry_llm(rec, [], echoed=asked * 5)
    calls, findings = _analyse(Recorder.write(tmp_path / "echo.jsonl", rec.take()))
    assert calls == [
        ("charge", "requested", "requested", 2),
        ("get_order", "requested", "requested", 2),
    ]
    assert findings == []  # two requests each: under the loop threshold (3)


def test_requested_writes_are_a_loop_but_never_a_duplicate_write_or_write_after_unknown(
    tmp_path: Path,
) -> None:
    rec = Recorder()
    with rec.span("agent", **{"session.id": "c-writes"}):
        for n in range(3):
            _openllmetry_llm(rec, [("send_email", {"to": "x@y", "body": "hi"}, f"m{n}")])
        # A charge that timed out (executed)...
        with rec.span(
            "execute_tool charge",
            scope="other.genai",
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "charge",
                "gen_ai.tool.call.id": "c0",
                "gen_ai.tool.call.arguments": '{"order": "A1", "amount": 5}',
                "error.type": "TimeoutError",
            },
        ) as span:
            span.set_status(Status(StatusCode.ERROR))
    # ...then, in the next trace of the conversation, two requests to charge again.
    with rec.span("agent", **{"session.id": "c-writes"}):
        for n in (1, 2):
            _openllmetry_llm(rec, [("charge", {"order": "A1", "amount": 5}, f"c{n}")])
    calls, findings = _analyse(Recorder.write(tmp_path / "writes.jsonl", rec.take()))
    assert ("charge", "requested", "requested", 2) in calls
    assert {(f.kind, f.tool) for f in findings} == {("loop", "send_email")}


def test_requests_without_recorded_arguments_repeat_nothing(tmp_path: Path) -> None:
    rec = Recorder()
    prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
    with rec.span("agent", **{"session.id": "c-redacted"}):
        for n in range(3):
            attributes = {
                prefix + "function.name": "send_email",
                prefix + "function.arguments": "__REDACTED__",
                prefix + "id": f"r{n}",
            }
            with rec.span(
                "ChatCompletion", scope="openinference.instrumentation.openai", **attributes
            ):
                rec.tick(5)
    calls, findings = _analyse(Recorder.write(tmp_path / "redacted.jsonl", rec.take()))
    assert calls == [("send_email", "requested", "requested", 3)]
    assert findings == []


# -- requested and executed: one call -----------------------------------------------


def _requested_and_run(tmp_path: Path) -> Path:
    rec = Recorder()
    with rec.span("agent", **{"session.id": "c-run"}):
        # Three requests, each run by an instrumented tool (same call id): three calls.
        for n in range(3):
            _openllmetry_llm(rec, [("get_order", {"order_id": "A1"}, f"g{n}")])
            _genai_tool(rec, "get_order", {"order_id": "A1"}, f"g{n}")
        # Two calls in one response, only the first of them run: two calls.
        _openinference_llm(rec, [("search", {"q": "a"}, "s1"), ("search", {"q": "b"}, "s2")])
        _genai_tool(rec, "search", {"q": "a"}, "s1")
    with rec.span("agent", **{"session.id": "c-noid"}):
        # A tool span without a call id (LangChain's): the request is that call.
        for _ in range(3):
            _openinference_llm(rec, [("lookup", {"k": "v"}, "l1")])
            _genai_tool(rec, "lookup", {"k": "v"}, None)
    return Recorder.write(tmp_path / "run.jsonl", rec.take())


def test_a_request_and_the_tool_span_that_ran_it_are_counted_once(tmp_path: Path) -> None:
    calls, findings = _analyse(_requested_and_run(tmp_path))
    assert calls == [
        ("get_order", "genai", "succeeded", 3),
        ("lookup", "genai", "succeeded", 3),
        ("search", "genai", "succeeded", 1),
        ("search", "requested", "requested", 1),
    ]
    # The loops are the executed calls' (same answer each time), in their words.
    assert {(f.tool, f.count) for f in _loops(findings)} == {("get_order", 3), ("lookup", 3)}
    for loop in _loops(findings):
        assert loop.detail["explanation"].startswith(f"{loop.tool} ran 3 times")
        assert (loop.detail["executions"], loop.detail["requested"]) == (3, 0)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["get_order", "send_email"]),
            st.sampled_from(["A1", "B2"]),
            st.booleans(),  # run by an instrumented tool (its span with the call id)
            st.sampled_from(["openinference", "openllmetry"]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_every_call_is_counted_exactly_once(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str, bool, str]]
) -> None:
    # However requests and tool spans interleave, each call is one row: the
    # tool span's where one ran it, else the request's.
    rec = Recorder()
    with rec.span("agent", **{"session.id": "c-prop"}):
        asked: list[Request] = []
        for n, (tool, order, ran, stack) in enumerate(steps):
            request: Request = (tool, {"order_id": order}, f"call_{n}")
            llm = _openinference_llm if stack == "openinference" else _openllmetry_llm
            llm(rec, [request], echoed=asked)
            asked.append(request)
            if ran:
                _genai_tool(rec, tool, {"order_id": order}, f"call_{n}")
    path = Recorder.write(tmp_path_factory.mktemp("prop") / "t.jsonl", rec.take())
    calls, _ = _analyse(path)
    by_source: dict[str, int] = {}
    for _, source, _, count in calls:
        by_source[source] = by_source.get(source, 0) + count
    ran = sum(1 for step in steps if step[2])
    assert by_source == {
        k: v for k, v in {"genai": ran, "requested": len(steps) - ran}.items() if v
    }


# -- Strands Agents: arguments and results in span events -------------------------


def _strands(tmp_path: Path, *, redacted: bool = False) -> Path:
    rec = Recorder()

    def content(text: str) -> str:
        return "[REDACTED]" if redacted else text

    with rec.span("invoke_agent", scope="strands.telemetry.tracer", **{"session.id": "c-strands"}):
        for n in range(3):
            _strands_tool(
                rec,
                "get_order",
                content('{"order_id": "A1"}'),
                content('[{"text": "shipped"}]'),
                f"g{n}",
            )
        for n in range(3):
            _strands_tool(
                rec, "send_email", content('{"to": "x@y"}'), content('[{"text": "sent"}]'), f"m{n}"
            )
        for n in range(3):
            _strands_tool(
                rec,
                "charge",
                content('{"order": "A1", "amount": 5}'),
                content('[{"text": "Error: TimeoutError"}]' if n < 2 else '[{"text": "ok"}]'),
                f"c{n}",
                error="TimeoutError" if n < 2 else None,
            )
    return Recorder.write(tmp_path / "strands.jsonl", rec.take())


def test_strands_arguments_and_results_are_read_from_the_span_events(tmp_path: Path) -> None:
    _, findings = _analyse(_strands(tmp_path))
    assert {(f.kind, f.tool) for f in findings} == {
        ("loop", "get_order"),
        ("loop", "send_email"),
        ("duplicate_write", "send_email"),
        ("write_after_unknown", "charge"),
    }


def test_strands_redacted_events_are_unrecorded_arguments(tmp_path: Path) -> None:
    calls, findings = _analyse(_strands(tmp_path, redacted=True))
    assert sum(n for *_, n in calls) == 9
    assert findings == []


# -- ClickHouse gives the same answers --------------------------------------------


@pytest.mark.parametrize("reads", READS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_requested_calls_and_strands_events_on_clickhouse(
    table: Table,  # noqa: F811
    tmp_path: Path,
    reads: str,
) -> None:
    paths = [
        _identical_requests(tmp_path, count=5),
        _requested_and_run(tmp_path),
        _strands(tmp_path),
    ]
    table.load_read_by(reads, *paths)
    findings = _assert_same(table, paths, write_tools=WRITES)
    assert {(f.kind, f.tool) for f in findings} >= {
        ("loop", "get_order"),
        ("loop", "lookup"),
        ("write_after_unknown", "charge"),
    }
    requested = [f for f in _loops(findings) if f.detail["requested"]]
    assert [(f.conversation_id, f.count) for f in requested] == [("c-loop", 5)]
