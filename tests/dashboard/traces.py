"""Contract-shaped fixture traces written by the real OpenTelemetry SDK.

Every span goes through ``TracerProvider`` -> ``SimpleSpanProcessor`` ->
``FileSpanExporter`` (OTLP/JSON lines), with explicit timestamps so the data
is the same on every run and no test sleeps.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Status, StatusCode

BASE_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z
MS = 1_000_000


class CountingIds(IdGenerator):
    """Deterministic ids so that fixture files are byte-identical run to run."""

    def __init__(self) -> None:
        self._next = 0

    def generate_span_id(self) -> int:
        self._next += 1
        return 0x1000 + self._next

    def generate_trace_id(self) -> int:
        self._next += 1
        return 0xABC0_0000_0000 + self._next


@dataclass
class Attempt:
    outcome: str  # "ok" or an error code
    duration_ms: int
    delay_s: float = 0.0
    http_status: int | None = None


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    status: str
    attempts: list[Attempt]
    result: Any = None
    side_effect: str = "none"
    idempotency_key: str | None = None
    replayed: bool = False
    error_code: str | None = None
    retry_after_s: float | None = None
    gap_ms: int = 40  # model time before this call starts


@dataclass
class Conversation:
    conversation_id: str
    offset_s: int  # start, seconds after BASE_NS
    calls: list[Call] = field(default_factory=list)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


def send_email(attempt: Attempt | None) -> Call:
    """A keyed write; without an attempt it was replayed from the idempotency store."""
    return Call(
        "send_email",
        {"to": "a@example.com", "body": "hi"},
        "succeeded",
        [attempt] if attempt else [],
        result={"sent": True},
        side_effect="write",
        idempotency_key="email-1",
        replayed=attempt is None,
    )


def scenario() -> list[Conversation]:
    """Retries, an early stop, a loop, a duplicate write, permanent and replayed calls."""
    ok = Attempt("ok", 120)
    return [
        Conversation(
            "conv-retry",
            0,
            [
                Call(
                    "search_docs",
                    {"q": "refund policy"},
                    "succeeded",
                    [
                        Attempt("http_503", 200, 0.5, 503),
                        Attempt("http_503", 180, 1.0, 503),
                        Attempt("ok", 150),
                    ],
                    result={"hits": 3},
                ),
                Call(
                    "fetch_weather",
                    {"city": "Oslo"},
                    "attempt_limit",
                    [
                        Attempt("timeout", 1000, 0.25),
                        Attempt("timeout", 1000, 0.5),
                        Attempt("timeout", 1000),
                    ],
                    error_code="timeout",
                ),
            ],
        ),
        Conversation(
            "conv-budget",
            600,
            [
                Call(
                    "fetch_weather",
                    {"city": "Lima"},
                    "wait_budget",
                    [Attempt("http_429", 90, 0.0, 429)],
                    error_code="http_429",
                    retry_after_s=120.0,
                ),
                Call("search_docs", {"q": "lima"}, "succeeded", [ok], result={"hits": 1}),
            ],
        ),
        Conversation(
            "conv-loop",
            1800,
            [
                Call("lookup_order", {"id": 7}, "succeeded", [ok], result={"state": "pending"})
                for _ in range(4)
            ],
        ),
        Conversation(
            "conv-dup",
            3600,
            [
                # The same keyed write executed twice (a duplicate write),
                # then answered from the idempotency store (not a duplicate).
                send_email(ok),
                send_email(ok),
                send_email(None),
                Call(
                    "create_ticket",
                    {"title": ""},
                    "permanent_error",
                    [Attempt("http_400", 60, 0.0, 400)],
                    side_effect="write",
                    error_code="http_400",
                ),
            ],
        ),
    ]


class _Writer:
    def __init__(self, path: Path) -> None:
        self.provider = TracerProvider(
            resource=Resource.create(
                {"service.name": "fixture-agent", "service.instance.id": "fixture"}
            ),
            id_generator=CountingIds(),
        )
        self.provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
        self.tracer = self.provider.get_tracer("toolspan")
        self.agent_tracer = self.provider.get_tracer("fixture.agent")
        self.calls = 0

    def conversation(self, conv: Conversation) -> None:
        start = BASE_NS + conv.offset_s * 10**9
        agent = self.agent_tracer.start_span(
            "invoke_agent fixture",
            start_time=start,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.conversation.id": conv.conversation_id,
            },
        )
        agent_ctx = trace.set_span_in_context(agent)
        now = start + 5 * MS
        for turn, call in enumerate(conv.calls, start=1):
            model = self.agent_tracer.start_span(
                "chat fixture-model",
                context=agent_ctx,
                start_time=now,
                attributes={"gen_ai.operation.name": "chat"},
            )
            now += call.gap_ms * MS
            model.end(end_time=now)
            now = self._call(agent_ctx, conv.conversation_id, f"turn-{turn}", call, now)
        agent.end(end_time=now + 5 * MS)

    def _call(self, parent: Any, conversation_id: str, turn_id: str, call: Call, now: int) -> int:
        self.calls += 1
        call_id = f"call-{self.calls}"
        common = {
            "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": conversation_id,
            "toolspan.request.id": f"req-{conversation_id}",
            "toolspan.turn.id": f"{conversation_id}-{turn_id}",
            "toolspan.side_effect": call.side_effect,
        }
        if call.idempotency_key:
            common["toolspan.idempotency.key"] = call.idempotency_key
        span = self.tracer.start_span(
            f"execute_tool {call.tool}",
            context=parent,
            start_time=now,
            attributes={**common, "gen_ai.operation.name": "execute_tool"},
        )
        ctx = trace.set_span_in_context(span)
        waited = 0.0
        t = now + 1 * MS
        for number, attempt in enumerate(call.attempts, start=1):
            t = self._attempt(ctx, common, number, attempt, waited, t)
            waited += attempt.delay_s
        self._finish_call(span, call, waited)
        span.end(end_time=t + 1 * MS)
        return t + 1 * MS

    def _attempt(
        self, parent: Any, common: dict[str, Any], number: int, a: Attempt, waited: float, t: int
    ) -> int:
        attrs: dict[str, Any] = {
            **common,
            "toolspan.attempt": number,
            "http.request.resend_count": number - 1,
            "toolspan.attempt.outcome": a.outcome,
            "toolspan.retry.delay_s": a.delay_s,
            "toolspan.retry.elapsed_wait_s": waited,
        }
        if number > 1:
            attrs["toolspan.retry.initiator"] = "orchestrator"
        if a.outcome != "ok":
            attrs["error.type"] = a.outcome
        if a.http_status is not None:
            attrs["http.response.status_code"] = a.http_status
        span = self.tracer.start_span(
            f"attempt {number} {common['gen_ai.tool.name']}",
            context=parent,
            start_time=t,
            attributes=attrs,
        )
        if a.outcome != "ok":
            span.set_status(Status(StatusCode.ERROR, a.outcome))
        end = t + a.duration_ms * MS
        span.end(end_time=end)
        return end + int(a.delay_s * 1000) * MS

    @staticmethod
    def _finish_call(span: Any, call: Call, waited: float) -> None:
        attrs: dict[str, Any] = {
            "gen_ai.tool.call.arguments": canonical(call.args),
            "toolspan.args.hash": sha256(call.args),
            "toolspan.status": call.status,
            "toolspan.attempts": len(call.attempts),
            "toolspan.total_wait_s": round(waited, 2),
            "toolspan.retryable": call.status
            in {"attempt_limit", "wait_budget", "deadline_exceeded", "in_progress"},
        }
        if call.replayed:
            attrs["toolspan.idempotency.replayed"] = True
        if call.status == "succeeded":
            attrs["toolspan.result.hash"] = sha256(call.result)
            span.set_status(Status(StatusCode.OK))
        else:
            attrs["toolspan.error_code"] = call.error_code or call.status
            attrs["error.type"] = call.error_code or call.status
            span.set_status(Status(StatusCode.ERROR, call.error_code or call.status))
        if call.retry_after_s is not None:
            attrs["toolspan.retry_after_s"] = call.retry_after_s
        span.set_attributes(attrs)

    def close(self) -> None:
        self.provider.shutdown()


def write_traces(path: Path, conversations: list[Conversation] | None = None) -> Path:
    """Write the scenario (or ``conversations``) as OTLP/JSON lines to ``path``."""
    writer = _Writer(path)
    for conv in conversations if conversations is not None else scenario():
        writer.conversation(conv)
    writer.close()
    return path


def write_chat_only(path: Path) -> Path:
    """A trace file with agent and model spans but not one tool span."""
    return write_traces(path, [Conversation(f"chat-{n}", n * 60, []) for n in range(3)])


def many_conversations(count: int) -> Iterator[Conversation]:
    """``count`` conversations cycling through the scenario's shapes (for pagination)."""
    shapes = scenario()
    for n in range(count):
        shape = shapes[n % len(shapes)]
        yield Conversation(f"{shape.conversation_id}-{n}", n * 30, list(shape.calls))
