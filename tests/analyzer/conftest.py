"""Fixtures for the analyzer tests: labelled traces recorded with the real
OpenTelemetry SDK and written by the real OTLP/JSON file exporter."""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import zstandard
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import Status, StatusCode

from toolspan.analyzer import Analyzer

T0_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


def span_hex(span: ReadableSpan | trace.Span) -> str:
    return format(span.get_span_context().span_id, "016x")


def trace_hex(span: ReadableSpan | trace.Span) -> str:
    return format(span.get_span_context().trace_id, "032x")


class _Collect(SpanProcessor):
    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class Recorder:
    """Records spans with a fake clock; writes them as OTLP/JSON lines files."""

    def __init__(self, service: str = "agent") -> None:
        self._collect = _Collect()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(self._collect)
        self.now = T0_NS
        self._parents: list[trace.Span] = []
        self._ids = 0

    # -- plumbing --------------------------------------------------------------

    def tick(self, ms: float = 10.0) -> int:
        self.now += int(ms * 1_000_000)
        return self.now

    def tracer(self, scope: str) -> trace.Tracer:
        return self.provider.get_tracer(scope)

    def _context(self) -> otel_context.Context:
        if self._parents:
            return trace.set_span_in_context(self._parents[-1])
        return otel_context.Context()  # a new trace

    def next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    @contextmanager
    def span(self, name: str, scope: str = "agent", **attributes: Any) -> Iterator[trace.Span]:
        span = self.tracer(scope).start_span(
            name, context=self._context(), attributes=attributes, start_time=self.tick(1)
        )
        self._parents.append(span)
        try:
            yield span
        finally:
            self._parents.pop()
            span.end(end_time=self.tick(1))

    @contextmanager
    def conversation(self, conversation_id: str | None) -> Iterator[trace.Span]:
        """A root agent span (a new trace) carrying the conversation id, if any."""
        saved, self._parents = self._parents, []
        attributes = {"gen_ai.operation.name": "invoke_agent"}
        if conversation_id:
            attributes["gen_ai.conversation.id"] = conversation_id
        try:
            with self.span("invoke_agent demo", **attributes) as root:
                yield root
        finally:
            self._parents = saved

    # -- toolspan's own spans (docs/trace-contract.md) --------------------------

    def toolspan_call(
        self,
        tool: str,
        conversation: str,
        args: dict[str, Any],
        *,
        result: Any = None,
        outcomes: Sequence[str] = ("ok",),
        status: str | None = None,
        side_effect: str = "none",
        key: str | None = None,
        replayed: bool = False,
        wait_s: float = 0.0,
        duration_ms: float = 20.0,
        extra: dict[str, Any] | None = None,
    ) -> ReadableSpan:
        """One logical call: a call span and one attempt span per outcome.

        ``extra`` attributes go on the call span and its attempt spans (request id,
        resource key, read-back).
        """
        final = status or ("succeeded" if outcomes and outcomes[-1] == "ok" else "attempt_limit")
        call_id = self.next_id("call_")
        common: dict[str, Any] = {
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": conversation,
            "toolspan.side_effect": side_effect,
            **(extra or {}),
        }
        if key is not None:
            common["toolspan.idempotency.key"] = key
        attributes: dict[str, Any] = {
            **common,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.arguments": canonical(args),
            "toolspan.args.hash": sha(args),
            "toolspan.status": final,
            "toolspan.attempts": len(outcomes),
            "toolspan.total_wait_s": wait_s,
            "toolspan.retryable": final in {"attempt_limit", "wait_budget"},
        }
        if key is not None:
            attributes["toolspan.idempotency.replayed"] = replayed
        if final == "succeeded":
            attributes["toolspan.result.hash"] = sha(result)
        else:
            attributes["toolspan.error_code"] = outcomes[-1] if outcomes else final
            attributes["error.type"] = attributes["toolspan.error_code"]
        with self.span(f"execute_tool {tool}", scope="toolspan", **attributes) as call:
            for number, outcome in enumerate(outcomes, start=1):
                with self.span(
                    f"attempt {number} {tool}",
                    scope="toolspan",
                    **common,
                    **{
                        "toolspan.attempt": number,
                        "http.request.resend_count": number - 1,
                        "toolspan.attempt.outcome": outcome,
                        "toolspan.retry.delay_s": 0.0,
                        "toolspan.retry.elapsed_wait_s": 0.0,
                    },
                ) as attempt:
                    self.tick(duration_ms / max(len(outcomes), 1))
                    if outcome != "ok":
                        attempt.set_attribute("error.type", outcome)
                        attempt.set_status(Status(StatusCode.ERROR, outcome))
            if final == "succeeded":
                call.set_status(Status(StatusCode.OK))
            else:
                call.set_status(Status(StatusCode.ERROR, final))
        return self._collect.ended[-1]

    # -- other instrumentations ------------------------------------------------

    def genai_tool(
        self,
        tool: str,
        arguments: str,
        result: str | None,
        *,
        conversation: str | None = None,
        error: str | None = None,
    ) -> ReadableSpan:
        """A GenAI-convention execute_tool span, as Pydantic AI or others emit."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": self.next_id("g_"),
            "gen_ai.tool.call.arguments": arguments,
        }
        if result is not None:
            attributes["gen_ai.tool.call.result"] = result
        if conversation:
            attributes["gen_ai.conversation.id"] = conversation
        with self.span(f"execute_tool {tool}", scope="other.genai", **attributes) as span:
            self.tick(15)
            if error:
                span.set_attribute("error.type", error)
                span.set_status(Status(StatusCode.ERROR, error))
        return self._collect.ended[-1]

    def openinference_tool(
        self, tool: str, input_value: str, output_value: str, *, session: str | None = None
    ) -> ReadableSpan:
        """An OpenInference TOOL span (LangChain, LlamaIndex, CrewAI, OpenAI Agents)."""
        attributes: dict[str, Any] = {
            "openinference.span.kind": "TOOL",
            "tool.name": tool,
            "input.value": input_value,
            "input.mime_type": "application/json",
            "output.value": output_value,
        }
        if session:
            attributes["session.id"] = session
        with self.span(tool, scope="openinference.instrumentation.langchain", **attributes):
            self.tick(12)
        return self._collect.ended[-1]

    def noise(self, conversation: str | None = None) -> None:
        """Chat and HTTP spans, the chat one with tool calls in its message history."""
        history = json.dumps(
            [
                {"role": "assistant", "parts": [{"type": "tool_call", "name": "search"}]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "result": "x"}]},
            ]
        )
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": history,
            "llm.input_messages.0.message.tool_calls.0.tool_call.function.name": "search",
        }
        if conversation:
            attributes["gen_ai.conversation.id"] = conversation
        with self.span("chat gpt-test", scope="other.chat", **attributes):
            with self.span("POST", scope="http.client", **{"http.request.method": "POST"}):
                self.tick(30)

    # -- files -----------------------------------------------------------------

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self._collect.ended)

    def take(self) -> list[ReadableSpan]:
        """The spans recorded since the last take."""
        taken, self._collect.ended = self._collect.ended, []
        return taken

    @staticmethod
    def write(path: Path, spans: Sequence[ReadableSpan], batch: int = 4) -> Path:
        """Write spans with the real file exporter, ``batch`` spans per line."""
        exporter = FileSpanExporter(str(path))
        for start in range(0, len(spans), batch):
            exporter.export(list(spans[start : start + batch]))
        exporter.shutdown()
        return path


def gzip_copy(path: Path, target: Path) -> Path:
    target.write_bytes(gzip.compress(path.read_bytes()))
    return target


def zstd_copy(path: Path, target: Path) -> Path:
    target.write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
    return target


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def analyzer() -> Iterator[Analyzer]:
    with Analyzer() as az:
        yield az


@pytest.fixture
def scenario(tmp_path: Path) -> dict[str, object]:
    """Record all labelled conversations, spread over files, batches and noise."""
    rec = Recorder()
    labels: dict[str, object] = {}
    # loop: the same search, same answer, three times in one conversation.
    with rec.conversation("c-loop"):
        rec.noise("c-loop")
        labels["loop"] = [
            span_hex(rec.toolspan_call("search", "c-loop", {"q": "x"}, result=["a"]))
            for _ in range(3)
        ]
    # benign: two identical calls only.
    with rec.conversation("c-twice"):
        for _ in range(2):
            rec.toolspan_call("search", "c-twice", {"q": "y"}, result=["b"])
    # benign: polling that makes progress (same args, different results).
    with rec.conversation("c-poll"):
        for progress in range(4):
            rec.toolspan_call("job_status", "c-poll", {"job": 1}, result={"done": progress})
    # benign: retries inside one logical call.
    with rec.conversation("c-retry"):
        rec.toolspan_call(
            "search", "c-retry", {"q": "z"}, result=[], outcomes=("timeout",) * 3 + ("ok",)
        )
    # benign: the same call across three conversations.
    for n in range(3):
        with rec.conversation(f"c-across-{n}"):
            rec.toolspan_call("search", f"c-across-{n}", {"q": "same"}, result=["s"])
    first_file = rec.take()
    # cycle A, B, A, B, A, B; half of it lands in another file.
    with rec.conversation("c-cycle"):
        for _ in range(3):
            rec.toolspan_call("open_page", "c-cycle", {"url": "u"}, result="page")
            rec.toolspan_call("go_back", "c-cycle", {}, result="home")
    # a failing loop: the model repeats a call that keeps failing.
    with rec.conversation("c-fail-loop"):
        for _ in range(3):
            rec.toolspan_call(
                "fetch", "c-fail-loop", {"id": 9}, outcomes=("http_404",), status="permanent_error"
            )
    # duplicate writes.
    with rec.conversation("c-write"):
        labels["dup_unkeyed"] = [
            span_hex(
                rec.toolspan_call(
                    "send_email", "c-write", {"to": "a"}, result="sent", side_effect="write"
                )
            )
            for _ in range(2)
        ]
        labels["dup_keyed"] = [
            span_hex(
                rec.toolspan_call(
                    "pay", "c-write", {"amount": n}, result="ok", side_effect="write", key="k-pay"
                )
            )
            for n in (5, 5)
        ]
        # benign: a keyed write executed once and then replayed.
        rec.toolspan_call(
            "refund", "c-write", {"id": 1}, result="ok", side_effect="write", key="k-ref"
        )
        rec.toolspan_call(
            "refund",
            "c-write",
            {"id": 1},
            result="ok",
            side_effect="write",
            key="k-ref",
            replayed=True,
        )
        # benign: same write with different arguments; and a failed repeat.
        rec.toolspan_call("send_email", "c-write", {"to": "b"}, result="sent", side_effect="write")
        rec.toolspan_call("post", "c-write", {"m": 1}, result="ok", side_effect="write")
        rec.toolspan_call(
            "post",
            "c-write",
            {"m": 1},
            outcomes=("http_400",),
            status="permanent_error",
            side_effect="write",
        )
    # idempotency conflict: one key, two different argument sets.
    with rec.conversation("c-conflict"):
        # The second use of the key is refused by the tracer: nothing ran.
        labels["conflict"] = [
            span_hex(
                rec.toolspan_call(
                    "book",
                    "c-conflict",
                    {"seat": "1A"},
                    result="ok",
                    side_effect="write",
                    key="k-book",
                )
            ),
            span_hex(
                rec.toolspan_call(
                    "book",
                    "c-conflict",
                    {"seat": "2B"},
                    outcomes=(),
                    status="idempotency_conflict",
                    side_effect="write",
                    key="k-book",
                )
            ),
        ]
        # benign: same key, same args (a replay).
        rec.toolspan_call(
            "book", "c-conflict", {"seat": "3C"}, result="ok", side_effect="write", key="k-same"
        )
        rec.toolspan_call(
            "book",
            "c-conflict",
            {"seat": "3C"},
            result="ok",
            side_effect="write",
            key="k-same",
            replayed=True,
        )
    # unsafe retry: an unkeyed write attempted twice inside one call.
    with rec.conversation("c-unsafe"):
        labels["unsafe"] = span_hex(
            rec.toolspan_call(
                "create_user",
                "c-unsafe",
                {"n": "x"},
                outcomes=("http_503", "ok"),
                result="u1",
                side_effect="write",
            )
        )
        # benign: keyed write retried (on a service declared to honour keys:
        # else it is an unverified_keyed_retry); read-only call retried.
        rec.toolspan_call(
            "create_user",
            "c-unsafe",
            {"n": "y"},
            outcomes=("http_503", "ok"),
            result="u2",
            side_effect="write",
            key="k-u",
            extra={"toolspan.tool.keys_honoured": "true"},
        )
        rec.toolspan_call(
            "lookup", "c-unsafe", {"n": "y"}, outcomes=("timeout", "timeout", "ok"), result="u2"
        )
    second_file = rec.take()
    # Foreign instrumentations: GenAI execute_tool and OpenInference TOOL spans.
    with rec.conversation("c-genai"):
        for text in ('{"a": 1, "b": 2}', '{"b":2,"a":1}', '{ "a":1 ,"b":2 }'):
            rec.genai_tool("weather", text, '{"temp": 20, "unit": "C"}', conversation="c-genai")
        for _ in range(2):
            rec.genai_tool("create_ticket", '{"title": "t"}', '"T-1"', conversation="c-genai")
    with rec.conversation(None):  # no conversation id anywhere: the trace id is the conversation
        labels["no_conv_calls"] = [
            rec.genai_tool("lookup_sku", '{"sku": 7}', "{}") for _ in range(3)
        ]
    labels["no_conv_trace"] = trace_hex(labels["no_conv_calls"][0])  # type: ignore[index]
    with rec.conversation(None):
        for _ in range(3):
            rec.openinference_tool("wiki", '{"page": "Paris"}', "Paris is...", session="s-oi")
    third_file = rec.take()

    # Files: the first split over two files at a batch boundary, the second gzip, the third zst.
    Recorder.write(tmp_path / "a.jsonl", first_file[: len(first_file) // 2], batch=3)
    (tmp_path / "sub").mkdir()
    Recorder.write(tmp_path / "sub" / "b.jsonl", first_file[len(first_file) // 2 :], batch=5)
    plain = Recorder.write(tmp_path / "c.tmp", second_file, batch=7)
    gzip_copy(plain, tmp_path / "c.jsonl.gz")
    plain.unlink()
    plain = Recorder.write(tmp_path / "d.tmp", third_file, batch=2)
    zstd_copy(plain, tmp_path / "sub" / "d.json.zst")
    plain.unlink()
    (tmp_path / "notes.txt").write_text("not a trace file\n")
    labels["dir"] = tmp_path
    return labels
