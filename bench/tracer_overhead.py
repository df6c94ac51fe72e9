"""Per-call overhead of toolspan's executor on the success path.

Every variant runs the same read tool and emits the same two spans (a call
span and one attempt span with the same attributes) through one SDK
``TracerProvider`` + ``BatchSpanProcessor`` whose exporter discards
everything, so only the on-thread cost is compared:

* ``floor``: the two spans made by hand, attribute values precomputed: the
  least any instrumentation with these spans can cost. What is known before
  the tool runs goes in at the start; what only its outcome tells (the
  call's status, attempts, wait and result hash; the attempt's outcome and
  retry delay) is set after it returns, in one ``set_attributes`` per span;
  the attempt span is made current with ``context.attach``/``detach``, the
  API's cheapest way, and the OK status is one prebuilt ``Status``;
* ``floor, outcome at start``: the floor this benchmark had until 0.1's
  performance work, kept for comparison: every attribute, the outcome's too,
  passed to ``start_span``, and ``trace.use_span`` around the tool. No
  instrumentation can do the first (the result hash is not known before the
  result), which made that floor cheaper than any real one by one
  ``set_attributes`` per span (~2-3 us); ``use_span``'s context manager made it
  ~1 us dearer than a direct attach. Both corrected above;
* ``tenacity``: ``tenacity.Retrying`` (what people use today) around the same
  hand-made spans;
* ``executor``: ``toolspan.tracer.Executor.execute`` with JSON Schema
  validation, redaction (the arguments hold a secret-named key), canonical
  JSON and SHA-256 hashing of arguments and result all on;
* the same for ``AsyncExecutor`` (against an async floor), and the executor
  without a tracer (``NoOpTracerProvider``: the cost of everything but spans).
  These rows pass ``safeguards=None`` (the guards off: the floor keeps no guard
  state either, and the same call repeated in one conversation would soon be a
  loop); ``executor, guards in memory`` is the default executor, whose guards
  live in this process's memory, each call in a new conversation and request;
* adapter rows, against ``OpenAI dict + message`` (a plain-dict tool call
  through ``ToolCall.from_openai``, executed, rendered with
  ``to_openai_message``: the path before adapters): the OpenAI SDK's
  tool-call object the same way (``integrations.openai.tool_message``), and a
  whole ``ChatCompletion`` through ``integrations.openai.answer_chat``.

Variants are interleaved in every repeat; the figure is the median of the
repeats. ``--profile`` adds a cProfile breakdown of ``Executor.execute``;
``--gap`` where the executor's time beyond the floor's lives (the SDK calls
each makes, bytecodes per call, wall time inside and outside the SDK, garbage
collections); ``--line`` how close any structure can come: the executor's
required work written inline around the hand-made spans, and the executor's
own helpers called in a straight line (no core, run state or actions).

    .venv/bin/python bench/tracer_overhead.py [--iterations 3000] [--repeats 9] [--cpu-time]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import hashlib
import itertools
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import tenacity
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace import Tracer as SdkTracer
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from toolspan import tracer as tracer_package
from toolspan.tracer import (
    DEFAULT_RETRYABLE_CODES,
    AsyncExecutor,
    Executor,
    Tool,
    ToolCall,
    ToolError,
    ToolResult,
)
from toolspan.tracer.integrations import Declarations
from toolspan.tracer.integrations import openai as ts_openai

TOOL = "get_dock_status"
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "dock_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "include_bikes": {"type": "boolean"},
        "radius_m": {"type": "integer", "minimum": 0, "maximum": 5000},
        "api_key": {"type": "string"},
    },
    "required": ["dock_id"],
    "additionalProperties": False,
}
ARGUMENTS: dict[str, Any] = {
    "dock_id": "D-0042",
    "include_bikes": True,
    "radius_m": 250,
    "api_key": "sk-live-0123456789abcdef0123",  # redacted on the span, never sent out
}
ANSWER: dict[str, Any] = {
    "dock_id": "D-0042",
    "bikes_available": 3,
    "docks_free": 5,
    "open": True,
    "bikes": [{"id": "B-17", "battery": 0.82}, {"id": "B-23", "battery": 0.41}],
}
CALL = ToolCall(TOOL, "call_8f2d", ARGUMENTS, "conv-1", "req-1", "turn-1")


def get_dock_status(**arguments: Any) -> dict[str, Any]:
    """The remote service, answered locally: only the instrumentation is measured."""
    return ANSWER


async def get_dock_status_async(**arguments: Any) -> dict[str, Any]:
    return ANSWER


class DiscardingExporter(SpanExporter):
    """Counts and drops: the same cheap sink for every variant."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


# The attributes only the outcome tells (set once the tool returned).
CALL_OUTCOME = (
    "toolspan.status",
    "toolspan.retryable",
    "toolspan.attempts",
    "toolspan.total_wait_s",
    "toolspan.idempotency.replayed",
    "toolspan.result.hash",
)
ATTEMPT_OUTCOME = ("toolspan.attempt.outcome", "toolspan.retry.delay_s")
STATUS_OK = Status(StatusCode.OK)


@dataclass(frozen=True)
class SpanShapes:
    """The attributes the executor puts on its two spans, to copy by hand:
    all of them, and split into those known at the start and the outcome's."""

    call: dict[str, Any]
    attempt: dict[str, Any]

    @staticmethod
    def _split(attributes: dict[str, Any], outcome: Sequence[str]) -> tuple[dict[str, Any], ...]:
        assert set(outcome) <= set(attributes), sorted(set(outcome) - set(attributes))
        start = {k: v for k, v in attributes.items() if k not in outcome}
        return start, {k: attributes[k] for k in outcome}

    def __post_init__(self) -> None:
        call_start, call_end = self._split(self.call, CALL_OUTCOME)
        attempt_start, attempt_end = self._split(self.attempt, ATTEMPT_OUTCOME)
        object.__setattr__(self, "call_start", call_start)
        object.__setattr__(self, "call_end", call_end)
        object.__setattr__(self, "attempt_start", attempt_start)
        object.__setattr__(self, "attempt_end", attempt_end)

    call_start: dict[str, Any] = field(init=False)
    call_end: dict[str, Any] = field(init=False)
    attempt_start: dict[str, Any] = field(init=False)
    attempt_end: dict[str, Any] = field(init=False)


def executor_span_shapes() -> SpanShapes:
    """Run the executor once and read back exactly what it recorded."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    Executor([read_tool()], tracer_provider=provider, safeguards=None).execute(CALL)
    attempt_span, call_span = memory.get_finished_spans()
    assert call_span.name == f"execute_tool {TOOL}", call_span.name
    return SpanShapes(dict(call_span.attributes or {}), dict(attempt_span.attributes or {}))


def read_tool(fn: Callable[..., Any] = get_dock_status) -> Tool:
    return Tool(name=TOOL, fn=fn, side_effect="none", parameters=PARAMETERS)


# -- the variants --------------------------------------------------------------


def floor_call(tracer: Tracer, shapes: SpanShapes) -> Any:
    """The same two spans, by hand, with precomputed attributes: the outcome's
    after the tool returned, as any instrumentation must."""
    call_span = tracer.start_span(
        f"execute_tool {TOOL}", kind=SpanKind.INTERNAL, attributes=shapes.call_start
    )
    parent = trace.set_span_in_context(call_span)
    attempt_span = tracer.start_span(
        f"attempt 1 {TOOL}", context=parent, kind=SpanKind.INTERNAL, attributes=shapes.attempt_start
    )
    token = otel_context.attach(trace.set_span_in_context(attempt_span, parent))
    try:
        data = get_dock_status(**ARGUMENTS)
    finally:
        otel_context.detach(token)
    attempt_span.set_attributes(shapes.attempt_end)
    attempt_span.set_status(STATUS_OK)
    attempt_span.end()
    call_span.set_attributes(shapes.call_end)
    call_span.set_status(STATUS_OK)
    call_span.end()
    return data


def outcome_at_start_floor_call(tracer: Tracer, shapes: SpanShapes) -> Any:
    """The earlier floor: every attribute at the start, ``use_span`` around the tool."""
    call_span = tracer.start_span(
        f"execute_tool {TOOL}", kind=SpanKind.INTERNAL, attributes=shapes.call
    )
    attempt_span = tracer.start_span(
        f"attempt 1 {TOOL}",
        context=trace.set_span_in_context(call_span),
        kind=SpanKind.INTERNAL,
        attributes=shapes.attempt,
    )
    with trace.use_span(attempt_span, end_on_exit=False):
        data = get_dock_status(**ARGUMENTS)
    attempt_span.set_status(StatusCode.OK)
    attempt_span.end()
    call_span.set_status(StatusCode.OK)
    call_span.end()
    return data


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ToolError) and exc.code in DEFAULT_RETRYABLE_CODES


def tenacity_call(tracer: Tracer, shapes: SpanShapes) -> Any:
    """tenacity's retry loop (as its decorator builds it: one per call) + hand-made spans."""
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(4),
        wait=tenacity.wait_exponential_jitter(multiplier=0.5, max=4, jitter=0.125),
        retry=tenacity.retry_if_exception(_retryable),
        reraise=True,
    )
    call_span = tracer.start_span(
        f"execute_tool {TOOL}", kind=SpanKind.INTERNAL, attributes=shapes.call_start
    )
    context = trace.set_span_in_context(call_span)
    data = None
    for attempt in retrying:
        with attempt:
            number = attempt.retry_state.attempt_number
            attempt_span = tracer.start_span(
                f"attempt {number} {TOOL}",
                context=context,
                kind=SpanKind.INTERNAL,
                attributes=shapes.attempt_start,
            )
            token = otel_context.attach(trace.set_span_in_context(attempt_span, context))
            try:
                data = get_dock_status(**ARGUMENTS)
            except ToolError as exc:
                attempt_span.set_status(StatusCode.ERROR, exc.message)
                attempt_span.end()
                raise
            finally:
                otel_context.detach(token)
            attempt_span.set_attributes(shapes.attempt_end)
            attempt_span.set_status(STATUS_OK)
            attempt_span.end()
    call_span.set_attributes(shapes.call_end)
    call_span.set_status(STATUS_OK)
    call_span.end()
    return data


# -- timing --------------------------------------------------------------------


# Wall time by default; ``--cpu-time`` switches to this thread's CPU time,
# which a busy machine (other processes taking the cores) disturbs far less.
_clock_ns: Callable[[], int] = time.perf_counter_ns


def per_call_us(fn: Callable[[], Any], iterations: int) -> float:
    gc.collect()
    started = _clock_ns()
    for _ in range(iterations):
        fn()
    return (_clock_ns() - started) / iterations / 1000


def per_call_us_async(
    loop: asyncio.AbstractEventLoop, fn: Callable[[], Any], iterations: int
) -> float:
    async def timed() -> float:
        started = _clock_ns()
        for _ in range(iterations):
            await fn()
        return (_clock_ns() - started) / iterations / 1000

    gc.collect()
    return loop.run_until_complete(timed())


@dataclass
class Variant:
    label: str
    measure: Callable[[int], float]
    floor: str  # which variant it is compared with
    samples: list[float]


def build_variants(
    provider: TracerProvider, loop: asyncio.AbstractEventLoop, shapes: SpanShapes
) -> list[Variant]:
    tracer = provider.get_tracer("bench")
    executor = Executor(
        [read_tool()], tracer_provider=provider, rng=random.Random(1), safeguards=None
    )
    untraced = Executor(
        [read_tool()],
        tracer_provider=trace.NoOpTracerProvider(),
        rng=random.Random(1),
        safeguards=None,
    )
    # The default executor keeps its guards in memory (loop guard, turn budget, unknown
    # outcomes per conversation); each call is of a new conversation and request, so
    # every one runs the tool and none is refused as a loop or over budget.
    guarded = Executor([read_tool()], tracer_provider=provider, rng=random.Random(1))
    guarded_untraced = Executor(
        [read_tool()], tracer_provider=trace.NoOpTracerProvider(), rng=random.Random(1)
    )
    conversations = itertools.count()

    def guarded_per_call_us(target: Executor, n: int) -> float:
        calls = iter(
            [
                ToolCall(TOOL, "call_8f2d", ARGUMENTS, f"conv-{i}", f"req-{i}", "turn-1")
                for i in itertools.islice(conversations, n)
            ]
        )
        return per_call_us(lambda: target.execute(next(calls)), n)

    json_call = ToolCall(TOOL, "call_8f2d", CALL_JSON, "conv-1", "req-1", "turn-1")
    async_executor = AsyncExecutor(
        [read_tool(get_dock_status_async)],
        tracer_provider=provider,
        rng=random.Random(1),
        safeguards=None,
    )

    async def async_floor() -> Any:
        return floor_call(tracer, shapes)

    async def async_outcome_at_start_floor() -> Any:
        return outcome_at_start_floor_call(tracer, shapes)

    sdk_call, completion = openai_objects()
    declarations = Declarations.from_tools(executor.tools.values())

    dict_call = sdk_call.model_dump()

    def openai_dict_path() -> Any:
        call = ToolCall.from_openai(
            dict_call, conversation_id="conv-1", request_id="req-1", turn_id="turn-1"
        )
        return executor.execute(call).to_openai_message()

    def openai_object_path() -> Any:
        call = ToolCall.from_openai(
            sdk_call, conversation_id="conv-1", request_id="req-1", turn_id="turn-1"
        )
        return ts_openai.tool_message(executor.execute(call))

    def openai_answer_chat() -> Any:
        return ts_openai.answer_chat(
            executor,
            completion,
            conversation_id="conv-1",
            request_id="req-1",
            turn_id="turn-1",
            declarations=declarations,
        )

    def variant(label: str, measure: Callable[[int], float], floor: str = "floor") -> Variant:
        return Variant(label, measure, floor, [])

    return [
        variant("floor", lambda n: per_call_us(lambda: floor_call(tracer, shapes), n)),
        variant(
            "floor, outcome at start",
            lambda n: per_call_us(lambda: outcome_at_start_floor_call(tracer, shapes), n),
        ),
        variant("tenacity", lambda n: per_call_us(lambda: tenacity_call(tracer, shapes), n)),
        variant("executor", lambda n: per_call_us(lambda: executor.execute(CALL), n)),
        variant("executor, JSON text", lambda n: per_call_us(lambda: executor(json_call), n)),
        variant("executor, no tracer", lambda n: per_call_us(lambda: untraced(CALL), n)),
        variant("executor, guards in memory", lambda n: guarded_per_call_us(guarded, n)),
        variant(
            "executor, guards in memory, no tracer",
            lambda n: guarded_per_call_us(guarded_untraced, n),
            "floor",
        ),
        variant("async floor", lambda n: per_call_us_async(loop, async_floor, n), "async floor"),
        variant(
            "async floor, outcome at start",
            lambda n: per_call_us_async(loop, async_outcome_at_start_floor, n),
            "async floor",
        ),
        variant(
            "async executor",
            lambda n: per_call_us_async(loop, lambda: async_executor.execute(CALL), n),
            "async floor",
        ),
        variant("OpenAI dict + message", lambda n: per_call_us(openai_dict_path, n)),
        variant(
            "OpenAI object + message",
            lambda n: per_call_us(openai_object_path, n),
            "OpenAI dict + message",
        ),
        variant(
            "OpenAI answer_chat",
            lambda n: per_call_us(openai_answer_chat, n),
            "OpenAI dict + message",
        ),
    ]


def openai_objects() -> tuple[ChatCompletionMessageFunctionToolCall, ChatCompletion]:
    """The SDK's own pydantic objects for the benchmark call, as its parser makes them."""
    raw = {
        "id": "call_8f2d",
        "type": "function",
        "function": {"name": TOOL, "arguments": CALL_JSON},
    }
    completion = ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": None, "tool_calls": [raw]},
                }
            ],
        }
    )
    return ChatCompletionMessageFunctionToolCall.model_validate(raw), completion


CALL_JSON = (
    '{"dock_id": "D-0042", "include_bikes": true, "radius_m": 250, '
    '"api_key": "sk-live-0123456789abcdef0123"}'
)


def sample(
    variants: list[Variant],
    provider: TracerProvider,
    iterations: int,
    repeats: int,
    warmup: int,
) -> None:
    """Warm every variant up, then take ``repeats`` samples of each."""
    for item in variants:
        item.measure(warmup)
    provider.force_flush()
    for _ in range(repeats):
        # Interleaved, so drift (thermal, other load) hits every variant alike.
        for item in variants:
            item.samples.append(item.measure(iterations))
            provider.force_flush()


def run(iterations: int, repeats: int, warmup: int) -> list[Variant]:
    exporter = DiscardingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    loop = asyncio.new_event_loop()
    try:
        variants = build_variants(provider, loop, executor_span_shapes())
        sample(variants, provider, iterations, repeats, warmup)
    finally:
        loop.close()
        provider.shutdown()
    expected = 2 * (warmup + repeats * iterations) * (len(variants) - 1)  # no-tracer emits none
    if exporter.exported != expected:
        print(f"warning: {expected - exporter.exported} spans dropped by the batch processor")
    return variants


def report(variants: list[Variant], iterations: int, repeats: int) -> None:
    medians = {item.label: statistics.median(item.samples) for item in variants}
    clock = "thread CPU time" if _clock_ns is time.thread_time_ns else "wall time"
    print(
        f"Python {sys.version.split()[0]}, opentelemetry-sdk + BatchSpanProcessor "
        f"(discarding exporter); {iterations} calls x {repeats} repeats, median {clock}"
    )
    print(f"{'variant':<30} {'us/call':>9} {'min..max':>15} {'x floor':>8}")
    for item in variants:
        spread = f"{min(item.samples):.1f}..{max(item.samples):.1f}"
        ratio = medians[item.label] / medians[item.floor]
        print(f"{item.label:<30} {medians[item.label]:>9.1f} {spread:>15} {ratio:>7.2f}x")
    earlier, async_earlier = (
        medians["floor, outcome at start"],
        medians["async floor, outcome at start"],
    )
    print(
        f"against the earlier floors (outcome at start): executor "
        f"{medians['executor'] / earlier:.2f}x, async executor "
        f"{medians['async executor'] / async_earlier:.2f}x"
    )


def profile(iterations: int) -> None:
    """Where the executor's time goes, next to the floor's, by module (cProfile).

    cProfile inflates every Python call, so read the shares, not the totals.
    """
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardingExporter()))
    tracer = provider.get_tracer("bench")
    shapes = executor_span_shapes()
    executor = Executor(
        [read_tool()], tracer_provider=provider, rng=random.Random(1), safeguards=None
    )
    by_group: dict[str, dict[str, float]] = {}
    functions: list[tuple[float, float, str]] = []
    for label, fn in (
        ("executor", lambda: executor.execute(CALL)),
        ("floor", lambda: floor_call(tracer, shapes)),
    ):
        stats = _profiled(fn, iterations)
        for (path, line, name), row in stats.items():
            own_us, cumulative_us = row[2] * 1e6 / iterations, row[3] * 1e6 / iterations
            times = by_group.setdefault(_group(path, name), {})
            times[label] = times.get(label, 0.0) + own_us
            if label == "executor" and path.startswith(_TRACER_DIR):
                functions.append((own_us, cumulative_us, f"{_short(path)}:{line} {name}"))
        provider.force_flush()
    provider.shutdown()
    print(f"\ncProfile, own time per call (us), {iterations} calls each")
    print(f"{'where':<44} {'executor':>9} {'floor':>7} {'extra':>7}")
    ordered = sorted(by_group.items(), key=lambda item: -item[1].get("executor", 0.0))
    for where, spent in ordered:
        ours, floor = spent.get("executor", 0.0), spent.get("floor", 0.0)
        if max(ours, floor) >= 0.3:
            print(f"{where:<44} {ours:>9.2f} {floor:>7.2f} {ours - floor:>+7.2f}")
    print("\ntoolspan functions (own / cumulative us per call)")
    for own, cumulative, where in sorted(functions, reverse=True)[:15]:
        print(f"{own:>7.2f} {cumulative:>7.2f}  {where}")


def gap(iterations: int) -> None:
    """Where the executor's extra time lives, next to the floor's: the SDK calls
    each makes, the bytecodes each runs, the time inside the SDK and the
    collections the garbage collector ran. A ``SimpleSpanProcessor`` (no export
    thread to wait for the GIL) and wall time, so that a call's time splits
    into the SDK's and the rest."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(DiscardingExporter()))
    variants = _gap_variants(provider)
    calls: dict[str, list[Any]] = {label: [] for label in variants}
    inside = [0]
    recording: list[list[Any]] = []
    originals = [
        (owner, name, getattr(owner, name))
        for owner, names in ((SdkTracer, ("start_span",)), (SdkSpan, _SDK_SPAN_CALLS))
        for name in names
    ]

    def timed(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if recording:
                # A None passed for a default (start_time, end_time) is the default.
                shown = {k: v for k, v in kwargs.items() if v is not None and k != "context"}
                recording[0].append((name, _sdk_arguments(args[1:]), _sdk_arguments(shown)))
            started = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                inside[0] += time.perf_counter_ns() - started

        return call

    bytecodes = _bytecodes(variants)
    collections = _collections(variants, iterations)
    for owner, name, original in originals:
        setattr(owner, name, timed(name, original))
    try:
        for label, fn in variants.items():
            fn()
            recording.append(calls[label])
            fn()
            recording.clear()
        same = calls["floor"] == calls["executor"]
        verdict = "the same calls, arguments and attributes" if same else "DIFFERENT"
        print(
            f"\nSDK calls per call: floor {len(calls['floor'])}, executor "
            f"{len(calls['executor'])} ({verdict})"
        )
        if not same:
            for floor_call_, executor_call in zip(calls["floor"], calls["executor"], strict=False):
                if floor_call_ != executor_call:
                    print(f"  floor:    {floor_call_}\n  executor: {executor_call}")
        print(
            f"{'per call':<10} {'bytecodes':>32} {'wall us':>8} {'in SDK':>7} {'rest':>6}  gc 0/1/2"
        )
        for label, fn in variants.items():
            totals, sdk = [], []
            for _ in range(5):
                inside[0] = 0
                gc.collect()
                started = time.perf_counter_ns()
                for _ in range(iterations):
                    fn()
                totals.append((time.perf_counter_ns() - started) / iterations / 1000)
                sdk.append(inside[0] / iterations / 1000)
            total, in_sdk = statistics.median(totals), statistics.median(sdk)
            print(
                f"{label:<10} {bytecodes[label]:>32} {total:>8.2f} {in_sdk:>7.2f}"
                f" {total - in_sdk:>6.2f}  {collections[label]}"
            )
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
        provider.shutdown()


def _gap_variants(provider: TracerProvider) -> dict[str, Callable[[], Any]]:
    """The floor and the executor, both on ``provider``: what ``--gap`` compares."""
    tracer = provider.get_tracer("bench")
    shapes = executor_span_shapes()
    executor = Executor(
        [read_tool()], tracer_provider=provider, rng=random.Random(1), safeguards=None
    )
    return {
        "floor": lambda: floor_call(tracer, shapes),
        "executor": lambda: executor.execute(CALL),
    }


_SDK_SPAN_CALLS = ("set_attribute", "set_attributes", "set_status", "add_event", "end")


def _sdk_arguments(values: Any) -> Any:
    """What an SDK call was given, comparable across the two variants: span
    names and attribute dicts as they are, statuses by code, spans by name."""
    if isinstance(values, dict):
        return {key: _sdk_arguments(value) for key, value in values.items()}
    if isinstance(values, tuple):
        return tuple(_sdk_arguments(value) for value in values)
    if isinstance(values, Status):
        return values.status_code
    if isinstance(values, SdkSpan):
        return values.name
    return values


def _bytecodes(variants: dict[str, Callable[[], Any]]) -> dict[str, str]:
    """Bytecodes one call runs (``sys.settrace`` opcode events), the SDK's and the rest."""
    counted: dict[str, str] = {}
    for label, fn in variants.items():
        counts = _count_bytecodes(fn)
        counted[label] = f"{counts['sdk']} OpenTelemetry + {counts['other']} other"
    return counted


def _collections(variants: dict[str, Callable[[], Any]], iterations: int) -> dict[str, str]:
    """Garbage collections per 1000 calls by generation, with the benchmark's
    ``BatchSpanProcessor`` (its queue keeps spans alive, so they age)."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardingExporter()))
    batch_variants = _gap_variants(provider)
    assert batch_variants.keys() == variants.keys()
    counted: dict[str, str] = {}
    for label, fn in batch_variants.items():
        for _ in range(1000):
            fn()
        gc.collect()
        before = [stats["collections"] for stats in gc.get_stats()]
        for _ in range(5 * iterations):
            fn()
        after = [stats["collections"] for stats in gc.get_stats()]
        counted[label] = "/".join(
            f"{(b - a) * 1000 / (5 * iterations):.0f}" for a, b in zip(before, after, strict=True)
        )
        provider.force_flush()
    provider.shutdown()
    return counted


def _count_bytecodes(fn: Callable[[], Any]) -> dict[str, int]:
    counts = {"sdk": 0, "other": 0}

    def trace_opcodes(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            counts["sdk" if "opentelemetry" in frame.f_code.co_filename else "other"] += 1
        return trace_opcodes

    fn()
    sys.settrace(trace_opcodes)
    try:
        fn()
    finally:
        sys.settrace(None)
    return counts


def _profiled(fn: Callable[[], Any], iterations: int) -> dict[Any, Any]:
    for _ in range(500):
        fn()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(iterations):
        fn()
    profiler.disable()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    return stats


def _group(path: str, name: str) -> str:
    """A module for Python code; the C function's name for built-ins."""
    if path == "~":
        return "built-in " + name.strip("<>").replace("built-in method ", "")
    if path == "<string>":
        return "fastjsonschema generated validator"
    if __file__ in path:
        return "bench (tool function, closures)"
    return _short(path).removesuffix(".py").replace("/__init__", "")


# toolspan's own code, wherever this checkout lives (a worktree, an installed copy).
_TRACER_DIR = str(Path(tracer_package.__file__).parent)
_CHECKOUT = str(Path(tracer_package.__file__).parent.parent) + "/"


def _short(path: str) -> str:
    for marker in ("site-packages/", _CHECKOUT, "lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


# -- --line: the required work without the executor's structure ---------------


def _line_variants(provider: TracerProvider) -> dict[str, Callable[[], Any]]:
    """The floor, the executor, and two builds of the executor's required work
    between them (each checked to give the executor's very result)."""
    from toolspan.tracer import _attributes as attr
    from toolspan.tracer._canonical import canonical_json
    from toolspan.tracer._core import _CURRENT_CALL
    from toolspan.tracer._result import package
    from toolspan.tracer._spans import base_attributes
    from toolspan.tracer._tool import parse_arguments

    tracer = provider.get_tracer("bench")
    shapes = executor_span_shapes()
    executor = Executor(
        [read_tool()], tracer_provider=provider, rng=random.Random(1), safeguards=None
    )
    declared = executor.tools[TOOL]
    quick = executor._core._plans[TOOL].quick_arguments
    writer = executor._core.spans
    sort = orjson.OPT_SORT_KEYS
    attempt_ok = {attr.ATTEMPT_OUTCOME: "ok", attr.RETRY_DELAY_S: 0.0}

    def inline() -> ToolResult:
        """Check and redact, canonical JSON and SHA-256, the attribute dicts, the
        current call, the spans by hand, the result: one function."""
        call = CALL
        arguments = dict(call.arguments)
        assert quick is not None
        redacted = quick(arguments)
        args_bytes = orjson.dumps(redacted, option=sort)
        base = {
            attr.TOOL_NAME: call.name,
            attr.TOOL_CALL_ID: call.call_id,
            attr.TOOL_TYPE: "function",
            attr.CONVERSATION_ID: call.conversation_id,
            attr.REQUEST_ID: call.request_id,
            attr.TURN_ID: call.turn_id,
            attr.SIDE_EFFECT: "none",
        }
        call_attributes = base.copy()
        call_attributes[attr.OPERATION_NAME] = "execute_tool"
        call_attributes[attr.TOOL_CALL_ARGUMENTS] = args_bytes.decode()
        call_attributes[attr.ARGS_HASH] = hashlib.sha256(args_bytes).hexdigest()
        call_span = tracer.start_span(
            f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=call_attributes
        )
        parent = trace.set_span_in_context(call_span)
        attempt_attributes = base.copy()
        attempt_attributes[attr.ATTEMPT] = 1
        attempt_attributes[attr.HTTP_RESEND_COUNT] = 0
        attempt_attributes[attr.RETRY_ELAPSED_WAIT_S] = 0.0
        attempt_span = tracer.start_span(
            f"attempt 1 {call.name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attempt_attributes,
        )
        token = otel_context.attach(trace.set_span_in_context(attempt_span, parent))
        current = _CURRENT_CALL.set(call)
        try:
            value = get_dock_status(**arguments)
        finally:
            _CURRENT_CALL.reset(current)
            otel_context.detach(token)
        attempt_span.set_attributes(attempt_ok)
        attempt_span.set_status(STATUS_OK)
        attempt_span.end()
        result_hash = hashlib.sha256(orjson.dumps(value, option=sort)).hexdigest()
        result = ToolResult(
            True, "succeeded", call.name, call.call_id, None, False, value, "ok", 1, 0.0
        )
        call_span.set_attributes(
            {
                attr.STATUS: "succeeded",
                attr.RETRYABLE: False,
                attr.ATTEMPTS: 1,
                attr.TOTAL_WAIT_S: 0.0,
                attr.IDEMPOTENCY_REPLAYED: False,
                attr.RESULT_HASH: result_hash,
            }
        )
        call_span.set_status(STATUS_OK)
        call_span.end()
        return result

    def helpers() -> ToolResult:
        """The same work through the executor's own helpers, in a straight line."""
        call = CALL
        arguments, _, redacted = parse_arguments(declared, call.arguments, quick)
        args_bytes = canonical_json(redacted)
        base = base_attributes(call, declared)
        span = writer.start_call(
            call, base, args_bytes.decode(), hashlib.sha256(args_bytes).hexdigest()
        )
        attempt_span, token = writer.start_attempt(span, call.name, base, 1, 0.0)
        current = _CURRENT_CALL.set(call)
        try:
            value = declared.fn(**arguments)
        finally:
            _CURRENT_CALL.reset(current)
            writer.detach(token)
        writer.attempt_succeeded(attempt_span)
        data, _, result_hash, truncated, message = package(value, 16 * 1024)
        result = ToolResult(
            True,
            "succeeded",
            call.name,
            call.call_id,
            None,
            False,
            data,
            message,
            1,
            truncated=truncated,
        )
        writer.call_succeeded(span, result, result_hash)
        return result

    expected = executor.execute(CALL)
    assert inline() == expected and helpers() == expected, (inline(), helpers(), expected)
    return {
        "floor": lambda: floor_call(tracer, shapes),
        "required work inline": inline,
        "executor's helpers in line": helpers,
        "executor": lambda: executor.execute(CALL),
    }


def line(iterations: int, repeats: int) -> None:
    """The floor, the required work inline, the helpers in a straight line and
    the executor, interleaved in every repeat: median per call and x floor."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardingExporter()))
    variants = [
        Variant(label, lambda n, fn=fn: per_call_us(fn, n), "floor", [])
        for label, fn in _line_variants(provider).items()
    ]
    sample(variants, provider, iterations, repeats, iterations // 3)
    provider.shutdown()
    medians = {item.label: statistics.median(item.samples) for item in variants}
    print(f"\nhow close a structure can come ({repeats} repeats of {iterations} calls)")
    for label, median in medians.items():
        print(f"{label:<30} {median:>9.1f} {median / medians['floor']:>7.2f}x")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--profile", action="store_true", help="add a cProfile breakdown")
    parser.add_argument(
        "--gap",
        action="store_true",
        help="add where the executor's extra time lives: SDK calls, bytecodes, time in the SDK, gc",
    )
    parser.add_argument(
        "--line",
        action="store_true",
        help="add the required work inline and the helpers in a straight line",
    )
    parser.add_argument(
        "--cpu-time", action="store_true", help="time with this thread's CPU clock, not wall"
    )
    options = parser.parse_args(argv)
    if options.cpu_time:
        global _clock_ns
        _clock_ns = time.thread_time_ns
    variants = run(options.iterations, options.repeats, options.warmup)
    report(variants, options.iterations, options.repeats)
    if options.profile:
        profile(options.iterations)
    if options.gap:
        gap(options.iterations)
    if options.line:
        line(options.iterations, options.repeats)


if __name__ == "__main__":
    main()
