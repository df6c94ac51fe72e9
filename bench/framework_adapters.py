"""What the framework adapters add on top of the executor, per tool call.

For each framework (OpenAI Agents SDK, Pydantic AI, LangChain), three
variants run the same read tool, interleaved in every repeat, through one
SDK ``TracerProvider`` + ``BatchSpanProcessor`` with a discarding exporter:

* ``tool``: the framework's own invocation of its tool (for the Agents SDK
  and Pydantic AI with their argument validation; for LangChain the
  handler's ToolMessage without the tool's callback machinery), no
  toolspan: what the framework costs anyway;
* ``executor``: a toolspan executor whose tool function is that same
  framework invocation, the call handed over as a ready ``ToolCall``: the
  floor for an adapter (the executor's own cost plus the framework's);
* ``adapter``: the adapter's entry point as the framework calls it (the
  guarded ``FunctionTool.on_invoke_tool``, ``GuardedToolset.call_tool``,
  ``RetryBoundaryMiddleware.wrap_tool_call``), which also derives the ids
  and key, finds the executor and maps the result to the native reply.

The ratio printed is ``adapter / executor``: 1.00x means the adapter adds
nothing measurable beyond the executor. Only the framework's tool layer is
timed, not its agent loop (a model turn costs far more than either).

    .venv/bin/python bench/framework_adapters.py [--iterations 2000] [--repeats 7] [--cpu-time]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from agents import RunConfig, function_tool, set_tracing_disabled
from agents.tool import invoke_function_tool
from agents.tool_context import ToolContext
from langchain.agents.middleware import ToolCallRequest
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.prebuilt.tool_node import ToolRuntime
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from toolspan.tracer import AsyncExecutor, Executor, ToolCall
from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.integrations.langchain import RetryBoundaryMiddleware
from toolspan.tracer.integrations.openai_agents import guard_tools
from toolspan.tracer.integrations.pydantic_ai import guard_toolset

TOOL = "get_dock_status"
ARGUMENTS: dict[str, Any] = {"dock_id": "D-0042", "include_bikes": True, "radius_m": 250}
ARGUMENTS_JSON = orjson.dumps(ARGUMENTS).decode()
ANSWER: dict[str, Any] = {"dock_id": "D-0042", "bikes_available": 3, "docks_free": 5}
DECLARATIONS = Declarations({TOOL: Declaration.read()})
IDS = {"conversation_id": "conv-1", "request_id": "req-1"}


async def get_dock_status(
    dock_id: str, include_bikes: bool = False, radius_m: int = 0
) -> dict[str, Any]:
    """Where the bikes are, answered locally: only the layers around it are measured.

    Async, so neither framework hands it to a worker thread (whose scheduling
    would drown the figures in noise).
    """
    return ANSWER


def get_dock_status_sync(
    dock_id: str, include_bikes: bool = False, radius_m: int = 0
) -> dict[str, Any]:
    return ANSWER


class DiscardingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


# Wall time by default; ``--cpu-time`` switches to this thread's CPU time.
_clock_ns: Callable[[], int] = time.perf_counter_ns


@dataclass
class Variant:
    label: str
    measure: Callable[[int], float]
    samples: list[float] = field(default_factory=list)


def timed_sync(fn: Callable[[], Any]) -> Callable[[int], float]:
    def measure(iterations: int) -> float:
        gc.collect()
        started = _clock_ns()
        for _ in range(iterations):
            fn()
        return (_clock_ns() - started) / iterations / 1000

    return measure


def timed_async(
    loop: asyncio.AbstractEventLoop, fn: Callable[[], Awaitable[Any]]
) -> Callable[[int], float]:
    async def timed(iterations: int) -> float:
        started = _clock_ns()
        for _ in range(iterations):
            await fn()
        return (_clock_ns() - started) / iterations / 1000

    def measure(iterations: int) -> float:
        gc.collect()
        return loop.run_until_complete(timed(iterations))

    return measure


def call(turn_id: str = "") -> ToolCall:
    """The ToolCall the adapter builds, ids and all (the same attributes on the spans)."""
    return DECLARATIONS.tool_call(TOOL, "call_1", ARGUMENTS_JSON, turn_id=turn_id, **IDS)


# -- the three frameworks --------------------------------------------------------


def agents_variants(provider: TracerProvider, loop: asyncio.AbstractEventLoop) -> list[Variant]:
    set_tracing_disabled(True)  # the SDK's own trace export is not what is measured
    tool = function_tool(get_dock_status)
    ctx = ToolContext(
        context=None,
        tool_name=TOOL,
        tool_call_id="call_1",
        tool_arguments=ARGUMENTS_JSON,
        run_config=RunConfig(group_id="conv-1", trace_metadata={"request_id": "req-1"}),
    )

    async def framework(**_: Any) -> Any:
        return await invoke_function_tool(function_tool=tool, context=ctx, arguments=ARGUMENTS_JSON)

    executor = AsyncExecutor(
        [DECLARATIONS.tool(TOOL, framework, parameters=tool.params_json_schema)],
        tracer_provider=provider,
        rng=random.Random(1),
    )
    (guarded,) = guard_tools([tool], DECLARATIONS, tracer_provider=provider, rng=random.Random(1))
    assert isinstance(guarded, type(tool))
    return [
        Variant("agents tool", timed_async(loop, framework)),
        Variant("agents executor", timed_async(loop, lambda: executor.execute(call()))),
        Variant(
            "agents adapter", timed_async(loop, lambda: guarded.on_invoke_tool(ctx, ARGUMENTS_JSON))
        ),
    ]


def pydantic_ai_variants(
    provider: TracerProvider, loop: asyncio.AbstractEventLoop
) -> list[Variant]:
    toolset = FunctionToolset([get_dock_status])
    ctx = RunContext(
        deps=None,
        model=TestModel(),
        usage=RunUsage(),
        conversation_id="conv-1",
        run_id="req-1",
        tool_name=TOOL,
        tool_call_id="call_1",
    )
    tools = loop.run_until_complete(toolset.get_tools(ctx))
    definition = tools[TOOL]

    async def framework(**_: Any) -> Any:
        return await toolset.call_tool(TOOL, ARGUMENTS, ctx, definition)

    executor = AsyncExecutor(
        [DECLARATIONS.tool(TOOL, framework, parameters=definition.tool_def.parameters_json_schema)],
        tracer_provider=provider,
        rng=random.Random(1),
    )
    guarded = guard_toolset(toolset, DECLARATIONS, tracer_provider=provider, rng=random.Random(1))
    return [
        Variant("pydantic-ai tool", timed_async(loop, framework)),
        Variant(
            "pydantic-ai executor",
            timed_async(loop, lambda: executor.execute(call("req-1-step0"))),
        ),
        Variant(
            "pydantic-ai adapter",
            timed_async(loop, lambda: guarded.call_tool(TOOL, ARGUMENTS, ctx, definition)),
        ),
    ]


def langchain_variants(provider: TracerProvider) -> list[Variant]:
    tool = StructuredTool.from_function(get_dock_status_sync, name=TOOL, description="Docks.")
    config: Any = {"configurable": {"thread_id": "conv-1", "request_id": "req-1"}}
    request = ToolCallRequest(
        tool_call={"name": TOOL, "args": ARGUMENTS, "id": "call_1", "type": "tool_call"},
        tool=tool,
        state={"messages": []},
        runtime=ToolRuntime(
            state={"messages": []},
            context=None,
            config=config,
            stream_writer=lambda _chunk: None,
            tool_call_id="call_1",
            store=None,
        ),
    )

    def handler(req: ToolCallRequest) -> ToolMessage:
        # What ToolNode's execute does, less the tool's callback machinery
        # (hundreds of microseconds, the same with or without the adapter).
        content = get_dock_status_sync(**req.tool_call["args"])
        return ToolMessage(content=orjson.dumps(content).decode(), name=TOOL, tool_call_id="call_1")

    def framework(**_: Any) -> Any:
        return handler(request).content

    parameters = tool.tool_call_schema.model_json_schema()  # type: ignore[union-attr]
    executor = Executor(
        [DECLARATIONS.tool(TOOL, framework, parameters=parameters)],
        tracer_provider=provider,
        rng=random.Random(1),
    )
    boundary = RetryBoundaryMiddleware(DECLARATIONS, tracer_provider=provider, rng=random.Random(1))
    return [
        Variant("langchain tool", timed_sync(lambda: handler(request))),
        Variant("langchain executor", timed_sync(lambda: executor.execute(call("req-1-turn0")))),
        Variant("langchain adapter", timed_sync(lambda: boundary.wrap_tool_call(request, handler))),
    ]


# -- running and reporting ---------------------------------------------------------


def run(iterations: int, repeats: int, warmup: int) -> list[Variant]:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DiscardingExporter()))
    loop = asyncio.new_event_loop()
    try:
        variants = [
            *agents_variants(provider, loop),
            *pydantic_ai_variants(provider, loop),
            *langchain_variants(provider),
        ]
        for item in variants:
            item.measure(warmup)
        provider.force_flush()
        for _ in range(repeats):
            for item in variants:  # interleaved: drift hits every variant alike
                item.samples.append(item.measure(iterations))
                provider.force_flush()
    finally:
        loop.close()
        provider.shutdown()
    return variants


def report(variants: list[Variant], iterations: int, repeats: int) -> None:
    medians = {item.label: statistics.median(item.samples) for item in variants}
    clock = "thread CPU time" if _clock_ns is time.thread_time_ns else "wall time"
    print(
        f"Python {sys.version.split()[0]}, opentelemetry-sdk + BatchSpanProcessor "
        f"(discarding exporter); {iterations} calls x {repeats} repeats, median {clock}"
    )
    print(f"{'variant':<22} {'us/call':>9} {'min..max':>15} {'x executor':>11}")
    for item in variants:
        framework = item.label.rsplit(" ", 1)[0]
        spread = f"{min(item.samples):.1f}..{max(item.samples):.1f}"
        ratio = medians[item.label] / medians[f"{framework} executor"]
        print(f"{item.label:<22} {medians[item.label]:>9.1f} {spread:>15} {ratio:>10.2f}x")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument(
        "--cpu-time", action="store_true", help="time with this thread's CPU clock, not wall"
    )
    options = parser.parse_args(argv)
    if options.cpu_time:
        global _clock_ns
        _clock_ns = time.thread_time_ns
    report(
        run(options.iterations, options.repeats, options.warmup),
        options.iterations,
        options.repeats,
    )


if __name__ == "__main__":
    main()
