"""Parallel writes on one resource: toolspan's executor serialises them (the
analyzer finds no parallel_write in its spans); the same calls through a plain
thread pool, with spans recorded as the trace contract says, race (one
parallel_write)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sample_traces._otel import DeterministicTelemetry
from toolspan.analyzer import Analyzer
from toolspan.tracer import Executor, Tool, ToolCall

CONVERSATION = "conv-parallel"


class Meeting:
    """The calls named here wait in the tool until all of them are inside it
    at once: the most overlap a scheduler allows, with no sleeping. A scheduler
    that ran them one after another fails the test (the wait times out)."""

    def __init__(self, *tags: str) -> None:
        self.tags = set(tags)
        self.barrier = threading.Barrier(len(tags), timeout=10)

    def join(self, tag: str) -> None:
        if tag in self.tags:
            self.barrier.wait()


def _by_order(arguments: Mapping[str, Any]) -> str:
    return f"order-{arguments['order_id']}"


def _tools(meeting: Meeting) -> list[Tool]:
    def refund_order(tag: str, order_id: str) -> dict[str, str]:
        meeting.join(tag)
        return {"refund": tag}

    def cancel_order(tag: str, order_id: str) -> dict[str, str]:
        meeting.join(tag)
        return {"cancelled": order_id}

    return [
        Tool(
            name,
            fn,
            side_effect="write",
            idempotent=True,
            key_passed="scripted",
            resource_key=_by_order,
        )
        for name, fn in (("refund_order", refund_order), ("cancel_order", cancel_order))
    ]


def _calls() -> list[ToolCall]:
    """One model step: two refunds and a cancel of order A, a refund of order B."""
    steps = [("refund_order", "a1", "A"), ("refund_order", "a2", "A")]
    steps += [("cancel_order", "c1", "A"), ("refund_order", "b1", "B")]
    return [
        ToolCall(
            name,
            tag,
            {"tag": tag, "order_id": order},
            conversation_id=CONVERSATION,
            request_id="req-1",
            idempotency_key=f"key-{tag}",
        )
        for name, tag, order in steps
    ]


def _canonical(value: Any) -> str:
    # The contract's canonical JSON: sorted keys, no spaces, UTF-8.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _run_plainly(telemetry: DeterministicTelemetry, tool: Tool, call: ToolCall) -> None:
    """One call with no retry boundary, its spans recorded as docs/trace-contract.md says."""
    tracer = telemetry.provider.get_tracer("toolspan")
    arguments = dict(call.arguments)  # type: ignore[arg-type]
    text = _canonical(arguments)
    common = {
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": call.conversation_id,
        "toolspan.request.id": call.request_id or "",
        "toolspan.side_effect": tool.side_effect,
        "toolspan.idempotency.key": call.idempotency_key or "",
        "toolspan.resource.key": _by_order(arguments),
    }
    call_attributes = {
        **common,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.call.arguments": text,
        "toolspan.args.hash": hashlib.sha256(text.encode()).hexdigest(),
    }
    with tracer.start_as_current_span(
        f"execute_tool {call.name}", attributes=call_attributes
    ) as span:
        with tracer.start_as_current_span(
            f"attempt 1 {call.name}", attributes={**common, "toolspan.attempt": 1}
        ) as attempt:
            result = tool.fn(**arguments)
            attempt.set_attribute("toolspan.attempt.outcome", "ok")
        span.set_attribute("toolspan.status", "succeeded")
        span.set_attribute("toolspan.attempts", 1)
        span.set_attribute(
            "toolspan.result.hash", hashlib.sha256(_canonical(result).encode()).hexdigest()
        )


def _analyse(telemetry: DeterministicTelemetry, path: Path) -> tuple[list[Any], dict[str, Any]]:
    telemetry.write_jsonl(path)
    with Analyzer() as az:
        az.ingest([path])
        findings = [f for f in az.findings() if f.kind == "parallel_write"]
        rows = az.query("SELECT call_id, resource_key, start_time, end_time FROM tool_calls").rows
    return findings, {call_id: (key, start, end) for call_id, key, start, end in rows}


def _overlap(calls: dict[str, Any], a: str, b: str) -> bool:
    return bool(calls[a][1] < calls[b][2] and calls[b][1] < calls[a][2])


def test_toolspan_executor_serialises_writes_on_one_resource(tmp_path: Path) -> None:
    telemetry = DeterministicTelemetry()
    # The first call of each lane meets the other: the batch really ran in parallel.
    executor = Executor(_tools(Meeting("a1", "b1")), tracer_provider=telemetry.provider)
    results = executor.execute_batch(_calls())
    assert [r.status for r in results] == ["succeeded"] * 4
    findings, calls = _analyse(telemetry, tmp_path / "toolspan.jsonl")
    assert findings == []
    assert {tag: key for tag, (key, _, _) in calls.items()} == {
        "a1": "order-A",
        "a2": "order-A",
        "c1": "order-A",
        "b1": "order-B",
    }
    assert _overlap(calls, "a1", "b1")  # different orders: side by side
    # One order: one after another, also across tools (refund and cancel).
    for one, other in (("a1", "a2"), ("a1", "c1"), ("a2", "c1")):
        assert not _overlap(calls, one, other)


def test_the_same_calls_through_a_plain_thread_pool_race(tmp_path: Path) -> None:
    telemetry = DeterministicTelemetry()
    tools = {tool.name: tool for tool in _tools(Meeting("a1", "a2", "c1", "b1"))}
    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(_run_plainly, telemetry, tools[c.name], c) for c in _calls()]:
            future.result()
    findings, _ = _analyse(telemetry, tmp_path / "pool.jsonl")
    (race,) = findings
    assert race.conversation_id == CONVERSATION
    assert race.detail["resource_key"] == "order-A"
    assert (race.tool, race.count) == (None, 3)  # order B raced with nobody
    assert race.detail["tools"] == ["cancel_order", "refund_order"]
    span_of = {
        str(span.attributes["gen_ai.tool.call.id"]): format(span.context.span_id, "016x")
        for span in telemetry.spans()
        if span.name.startswith("execute_tool") and span.attributes
    }
    assert set(race.span_ids) == {span_of[tag] for tag in ("a1", "a2", "c1")}
