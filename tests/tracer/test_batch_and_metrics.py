"""Parallel tool calls of one model step, and the metrics hook."""

from __future__ import annotations

import asyncio
import random
import threading
import time

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from toolspan.tracer import AsyncExecutor, Executor, MetricsHook, Tool, ToolCall, ToolError
from toolspan.tracer._batch import plan_lanes
from toolspan.tracer.testing import FakeClock

from .conftest import Scripted


class Tracker:
    """Records which calls overlap in time (a barrier would deadlock sequential lanes)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: set[str] = set()
        self.overlaps: set[frozenset[str]] = set()
        self.order: list[str] = []

    def run(self, name: str) -> dict:
        with self.lock:
            for other in self.active:
                self.overlaps.add(frozenset({name, other}))
            self.active.add(name)
            self.order.append(name)
        time.sleep(0.05)  # a real tool's latency: overlap must be observable
        with self.lock:
            self.active.discard(name)
        return {"done": name}


def tools(tracker):
    by_order = lambda args: args["order_id"]  # noqa: E731
    return [
        Tool("read", lambda tag: tracker.run(tag)),
        Tool(
            "ship",
            lambda tag, order_id: tracker.run(tag),
            side_effect="write",
            idempotent=True,
            key_passed="scripted",
            resource_key=by_order,
        ),
        Tool(
            "note",
            lambda tag, order_id: tracker.run(tag),
            side_effect="write",
            resource_key=by_order,
        ),
    ]


def calls():
    def c(name, tag, key=None, **extra):
        return ToolCall(
            name, tag, {"tag": tag, **extra}, conversation_id="conv", idempotency_key=key
        )

    return [
        c("read", "r1"),
        c("read", "r2"),
        c("ship", "s1", key="k1", order_id="A"),
        c("ship", "s2", key="k2", order_id="A"),
        c("ship", "s3", key="k3", order_id="B"),
        c("note", "n1", order_id="C"),
        c("note", "n2", order_id="D"),
    ]


def test_lanes_follow_the_rules():
    lanes = plan_lanes(calls(), {t.name: t for t in tools(Tracker())})
    names = sorted(sorted(calls()[i].call_id for i in lane) for lane in lanes)
    # reads alone; same resource together; unkeyed writes queue in one lane.
    assert names == [["n1", "n2"], ["r1"], ["r2"], ["s1", "s2"], ["s3"]]


def test_batch_runs_safe_calls_in_parallel_and_keeps_model_order():
    tracker = Tracker()
    executor = Executor(tools(tracker), tracer_provider=trace.NoOpTracerProvider())
    results = executor.execute_batch(calls())
    assert [r.call_id for r in results] == [c.call_id for c in calls()]
    assert all(r.ok for r in results)
    assert frozenset({"r1", "r2"}) in tracker.overlaps  # reads ran concurrently
    assert (
        frozenset({"s1", "s3"}) in tracker.overlaps or frozenset({"s2", "s3"}) in tracker.overlaps
    )
    assert frozenset({"s1", "s2"}) not in tracker.overlaps  # same order A: one after another
    assert frozenset({"n1", "n2"}) not in tracker.overlaps  # unkeyed writes never overlap
    assert tracker.order.index("s1") < tracker.order.index("s2")


def test_batch_spans_keep_their_parent(spans):
    tracker = Tracker()
    executor = Executor(tools(tracker), tracer_provider=spans.provider)
    parent_tracer = spans.provider.get_tracer("agent")
    with parent_tracer.start_as_current_span("agent turn") as turn:
        executor.execute_batch(calls())
    for call_span in spans.calls():
        assert call_span.parent.span_id == turn.get_span_context().span_id


def test_async_batch_keeps_order():
    tracker = Tracker()

    async def main():
        executor = AsyncExecutor(tools(tracker), tracer_provider=trace.NoOpTracerProvider())
        return await executor.execute_batch(calls())

    assert [r.call_id for r in asyncio.run(main())] == [c.call_id for c in calls()]


def test_metrics_hook_counts_attempts_statuses_and_delays():
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    clock = FakeClock()
    fake = Scripted(ToolError.from_status(503), {"ok": 1})
    executor = Executor(
        [Tool("weather", fake)],
        tracer_provider=trace.NoOpTracerProvider(),
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
        hooks=[MetricsHook(provider)],
    )
    executor.execute(ToolCall("weather", "c1", {}, conversation_id="conv"))
    points = {}
    for resource_metrics in reader.get_metrics_data().resource_metrics:
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, tuple(sorted(point.attributes.items())))
                    points[key] = getattr(point, "value", None) or getattr(point, "sum", None)
    assert (
        points[
            ("toolspan.tool.attempts", (("gen_ai.tool.name", "weather"), ("outcome", "http_503")))
        ]
        == 1
    )
    assert (
        points[("toolspan.tool.attempts", (("gen_ai.tool.name", "weather"), ("outcome", "ok")))]
        == 1
    )
    assert (
        points[
            (
                "toolspan.tool.calls",
                (("gen_ai.tool.name", "weather"), ("toolspan.status", "succeeded")),
            )
        ]
        == 1
    )
    assert points[("toolspan.retry.delay", (("gen_ai.tool.name", "weather"),))] == clock.slept[0]
