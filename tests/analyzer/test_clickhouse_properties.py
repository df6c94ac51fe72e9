"""The ClickHouse analysis against the DuckDB path on generated calls: whatever
the calls (every rule's edges, from test_retry_rules_properties), however
instrumented (SHAPES), delivered once or twice, with their attempts stated or
only as attempt spans, their conversation on them, on the trace's root span or
nowhere, in either exporter layout (Map or typed JSON attributes), read from
the raw spans or from `clickhouse init`'s copies, both give the same summary
and the same findings."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.clickhouse_backend import Backend

from .test_analyzer_clickhouse import LAYOUTS, READS, Table, _assert_same
from .test_retry_rules_properties import T0, Call, _calls

_T0_NS = int(T0.timestamp()) * 10**9


def _call(span_id: str, conversation: str, args: str, key: str | None, **fields: Any) -> Call:
    defaults: dict[str, Any] = {
        "request": None,
        "tool": "t1",
        "side_effect": "write",
        "status": "succeeded",
        "error_code": None,
        "replayed": False,
        "outcomes": ("ok",),
        "read_back": None,
        "resource": None,
        "start_ms": 0,
        "duration_ms": 0,
        "keys_honoured": None,
    }
    return Call(span_id, conversation, args=args, key=key, **{**defaults, **fields})


# Ties, which each engine used to break its own way: two writes under one key
# with different arguments, started together (whose arguments are shown), and
# a loop of calls started together, of different durations (which one was not
# wasted); and a call whose attempts are only its attempt spans.
_TIES = [
    _call("s000", "c2", "b", "k1"),
    _call("s001", "c2", "a", "k1"),
    *(_call(f"s00{n}", "c1", "a", None, side_effect="none", duration_ms=5 * n) for n in (2, 3, 4)),
    _call("s005", "c1", "b", None, outcomes=("http_503", "http_503", "ok")),
]


def _hex(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": v}

    return [{"key": k, "value": value(v)} for k, v in values.items() if v is not None]


# How a call is instrumented: toolspan's spans (with the conversation id, or
# without it: the trace's root span says it, or nobody does); toolspan's
# spans inside a framework's GenAI execute_tool span of the same tool (one
# call: the richer span wins); or a GenAI span alone (its arguments and
# result fingerprinted from their text, spaced unlike canonical JSON); no
# tool span, only the model's request in an LLM span (OpenInference's flattened
# output messages, or GenAI semconv's gen_ai.output.messages with a JSON
# object of arguments whose numbers each engine writes its own way); or
# Strands Agents' execute_tool span, its arguments and result in span events;
# or MLflow's TOOL span (no call id, no conversation; the inputs as f(**kwargs)
# binds them, the result a JSON-encoded text).
SHAPES = (
    "toolspan",
    "no_conversation",
    "wrapped",
    "genai",
    "requested",
    "requested_json",
    "strands",
    "mlflow",
)


def _span(trace: str, span_id: str, name: str, call: Call | None, **fields: Any) -> dict[str, Any]:
    """A span over ``call``'s time (``None``: at T0, an agent's root span)."""
    start_ms, end_ms = (call.start_ms, call.end_ms) if call else (0, 0)
    return {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": str(_T0_NS + start_ms * 10**6),
        "endTimeUnixNano": str(_T0_NS + end_ms * 10**6),
        **fields,
    }


def _spans(call: Call, *, stated: bool, shape: str, trace: str, root: str) -> list[dict[str, Any]]:
    """The spans of one call, as ``shape`` instruments it (under ``root``)."""
    call_id = _hex(call.span_id, 16)
    succeeded = call.status == "succeeded"
    arguments = json.dumps({"a": call.args, "n": [1, 2.0]})
    status = {"code": 1 if succeeded else 2}
    genai = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": "call_" + call_id,
        "gen_ai.tool.call.arguments": arguments,
    }
    if shape in ("requested", "requested_json", "strands", "mlflow"):
        return [_foreign_span(call, shape, trace=trace, root=root, call_id=call_id)]
    if shape == "genai":
        attributes = {
            **genai,
            "gen_ai.conversation.id": call.conversation,
            "gen_ai.tool.call.result": f' {{ "r" : "{call.tool} {call.args}" }}'
            if succeeded
            else None,
            "error.type": None if succeeded else (call.error_code or "failed"),
        }
        name = f"execute_tool {call.tool}"
        return [
            _span(
                trace,
                call_id,
                name,
                call,
                parentSpanId=root,
                attributes=_attributes(attributes),
                status=status,
            )
        ]
    spans = []
    parent = root
    if shape == "wrapped":
        parent = _hex(call.span_id + " framework", 16)
        spans.append(
            _span(
                trace,
                parent,
                f"running tool {call.tool}",
                call,
                parentSpanId=root,
                attributes=_attributes(genai),
                status=status,
            )
        )
    common = {
        "gen_ai.tool.name": call.tool,
        "gen_ai.conversation.id": None if shape == "no_conversation" else call.conversation,
        "toolspan.side_effect": call.side_effect,
        "toolspan.idempotency.key": call.key,
        "toolspan.request.id": call.request,
        "toolspan.resource.key": call.resource,
        "toolspan.read_back": call.read_back,
        "toolspan.tool.keys_honoured": call.keys_honoured,
    }
    attributes = {
        **genai,
        **common,
        "toolspan.args.hash": _hex("args " + call.args, 64),
        "toolspan.status": call.status,
        # The same result for the same tool and arguments: loops form.
        "toolspan.result.hash": _hex(f"{call.tool} {call.args}", 64) if succeeded else None,
        "toolspan.error_code": call.error_code,
        "toolspan.idempotency.replayed": call.replayed if call.key else None,
        "toolspan.attempts": call.attempts if stated else None,
    }
    name = f"execute_tool {call.tool}"
    spans.append(
        _span(
            trace,
            call_id,
            name,
            call,
            parentSpanId=parent,
            attributes=_attributes(attributes),
            status=status,
        )
    )
    for number, outcome in enumerate(call.outcomes, start=1):
        attempt = {**common, "toolspan.attempt": number, "toolspan.attempt.outcome": outcome}
        spans.append(
            _span(
                trace,
                _hex(f"{call.span_id} {number}", 16),
                f"attempt {number} {call.tool}",
                call,
                parentSpanId=call_id,
                attributes=_attributes(attempt),
                status={"code": 1 if outcome == "ok" else 2},
            )
        )
    return spans


# The instrumentation scope of the shapes recorded without toolspan.
_SCOPES = {
    "requested": "openinference.instrumentation.openai",
    "requested_json": "opentelemetry.instrumentation.openai.v1",
    "strands": "strands.telemetry.tracer",
    "mlflow": "mlflow.tracing.provider",
}


def _foreign_span(call: Call, shape: str, *, trace: str, root: str, call_id: str) -> dict[str, Any]:
    """The one span of a call ``shape`` records without toolspan: the LLM span
    requesting it, or Strands' or MLflow's tool span."""
    succeeded = call.status == "succeeded"
    arguments = {"a": call.args, "n": [1, 2.0]}
    if shape == "mlflow":
        return _mlflow_span(call, trace=trace, root=root, call_id=call_id, arguments=arguments)
    if shape == "requested":
        prefix = "llm.output_messages.0.message.tool_calls.0.tool_call."
        attributes: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "session.id": call.conversation,
            prefix + "function.name": call.tool,
            prefix + "function.arguments": json.dumps(arguments),
            prefix + "id": "call_" + call_id,
        }
        return _span(
            trace,
            call_id,
            "ChatCompletion",
            call,
            parentSpanId=root,
            attributes=_attributes(attributes),
            status={"code": 1},
        )
    if shape == "requested_json":
        part = {
            "type": "tool_call",
            "name": call.tool,
            "id": "call_" + call_id,
            "arguments": arguments,
        }
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": call.conversation,
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [part]}]),
            # The request echoed in the next chat's input: never counted.
            "gen_ai.input.messages": json.dumps([{"role": "assistant", "parts": [part]}]),
        }
        return _span(
            trace,
            call_id,
            "openai.chat",
            call,
            parentSpanId=root,
            attributes=_attributes(attributes),
            status={"code": 1},
        )
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gen_ai.tool.call.id": "call_" + call_id,
        "session.id": call.conversation,
    }
    events = [
        {
            "name": "gen_ai.tool.message",
            "attributes": _attributes({"role": "tool", "content": json.dumps(arguments)}),
        },
        {
            "name": "gen_ai.choice",
            "attributes": _attributes(
                {"message": json.dumps([{"text": f"{call.tool} {call.args}"}])}
            ),
        },
    ]
    if not succeeded:
        events.append(
            {
                "name": "exception",
                "attributes": _attributes({"exception.type": call.error_code or "failed"}),
            }
        )
    return _span(
        trace,
        call_id,
        f"execute_tool {call.tool}",
        call,
        parentSpanId=root,
        attributes=_attributes(attributes),
        events=events,
        status={"code": 1 if succeeded else 2},
    )


def _mlflow_span(
    call: Call, *, trace: str, root: str, call_id: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    succeeded = call.status == "succeeded"
    attributes = {
        "mlflow.spanType": '"TOOL"',
        "mlflow.spanInputs": json.dumps({"kwargs": arguments}),
        "mlflow.spanOutputs": json.dumps(f"{call.tool} {call.args}") if succeeded else None,
    }
    events: list[dict[str, Any]] = []
    if not succeeded:
        exception = {"exception.type": call.error_code or "failed"}
        events.append({"name": "exception", "attributes": _attributes(exception)})
    return _span(
        trace,
        call_id,
        call.tool,
        call,
        parentSpanId=root,
        attributes=_attributes(attributes),
        events=events,
        status={"code": 1 if succeeded else 2},
    )


def _request(spans: list[dict[str, Any]], scope: str = "toolspan") -> str:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": _attributes({"service.name": "agent"})},
                    "scopeSpans": [{"scope": {"name": scope}, "spans": spans}],
                }
            ]
        }
    )


def _write(
    path: Path,
    calls: list[Call],
    stated: list[bool],
    twice: list[bool],
    shapes: list[str],
    roots: list[bool],
) -> None:
    lines = []
    traces: dict[str, str] = {}
    for n, call in enumerate(calls):
        # Two traces per conversation: a trace's calls are judged together
        # (attempt counts, dominance), its conversation comes from its spans.
        trace = _hex(f"{call.conversation} {n % 2}", 32)
        if trace not in traces:
            traces[trace] = _hex(trace + " root", 16)
            if roots[len(traces) % len(roots)]:
                root = _span(
                    trace,
                    traces[trace],
                    "invoke_agent",
                    None,
                    attributes=_attributes({"gen_ai.conversation.id": call.conversation}),
                )
                lines.append(_request([root], "agent"))
        spans = _spans(call, stated=stated[n], shape=shapes[n], trace=trace, root=traces[trace])
        line = _request(spans, _SCOPES.get(shapes[n], "toolspan"))
        lines += [line, line] if twice[n] else [line]  # the collector retried the export
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("reads", READS)
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(
    calls=_TIES,
    stated=[True] * 5 + [False] + [True] * 8,
    twice=[False] * 14,
    shapes=["toolspan"] * 14,
    roots=[False] * 4,
    layout="json",
)
@given(
    calls=_calls(),
    stated=st.lists(st.booleans(), min_size=14, max_size=14),
    twice=st.lists(st.booleans(), min_size=14, max_size=14),
    shapes=st.lists(st.sampled_from(SHAPES), min_size=14, max_size=14),
    roots=st.lists(st.booleans(), min_size=4, max_size=4),
    layout=st.sampled_from(LAYOUTS),
)
def test_generated_calls_give_the_duckdb_findings(
    clickhouse: Backend,
    tmp_path_factory: pytest.TempPathFactory,
    reads: str,
    calls: list[Call],
    stated: list[bool],
    twice: list[bool],
    shapes: list[str],
    roots: list[bool],
    layout: str,
) -> None:
    path = tmp_path_factory.mktemp("calls") / "t.jsonl"
    _write(path, calls, stated, twice, shapes, roots)
    table = Table(clickhouse, layout)
    try:
        table.load_read_by(reads, path)
        _assert_same(table, [path], write_tools=["t1"])
    finally:
        table.drop()
