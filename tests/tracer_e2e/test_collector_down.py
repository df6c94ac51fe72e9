"""A collector that is down or slow never breaks a tool call nor slows it.

Measured, not assumed: per-call latency of ``Executor.execute`` with OTLP
export pointed at (a) a closed port and (b) a receiver that answers every
export 2 s late, against the same calls with no exporter at all. The SDK's
``BatchSpanProcessor`` exports on its own thread and drops spans when its
queue is full, so the call path only pays for queueing a span.

Run with ``-s`` to see the numbers (they are also recorded as junit
properties).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from toolspan.tracer import Telemetry, ToolCall, ToolError, ToolResult, setup_telemetry

from ..otlp_receiver import OtlpReceiver
from ..services import LOOPBACK, free_port
from .fake_service import FakeBikeShare, executor_for

pytestmark = pytest.mark.slow

Protocol = Literal["grpc", "http/protobuf"]
Collector = Literal["down", "slow"]

EXPORT_TIMEOUT_S = 0.5
SLOW_COLLECTOR_DELAY_S = 2.0
WARMUP_CALLS = 300
# 2 spans a call: 3000 spans pile up in the queue while the collector is
# down or slow; the call must not wait for them.
MEASURED_CALLS = 1500


@dataclass(frozen=True)
class Latency:
    p50_us: float
    p99_us: float
    max_us: float

    @classmethod
    def of(cls, samples_ns: list[int]) -> Latency:
        ordered = sorted(samples_ns)
        return cls(
            p50_us=ordered[len(ordered) // 2] / 1000,
            p99_us=ordered[int(len(ordered) * 0.99)] / 1000,
            max_us=ordered[-1] / 1000,
        )

    def __str__(self) -> str:
        return f"p50 {self.p50_us:.1f} us, p99 {self.p99_us:.1f} us, max {self.max_us:.0f} us"


def execute_many(
    tracer_provider: Any, count: int, warmup: int = WARMUP_CALLS
) -> tuple[Latency, list[ToolResult]]:
    """``count`` calls after ``warmup`` (every 5th retried once), timed one by one."""
    service = FakeBikeShare()
    executor, _ = executor_for(service, tracer_provider, seed=3)
    samples: list[int] = []
    results: list[ToolResult] = []
    for index in range(warmup + count):
        dock = f"D{index}"
        if index % 5 == 0:
            service.fail_next(dock, ToolError.from_status(503))
        call = ToolCall("get_dock_status", f"call-{index}", {"dock_id": dock}, "conv-1", "r", "t")
        started = time.perf_counter_ns()
        result = executor.execute(call)
        elapsed = time.perf_counter_ns() - started
        if index >= warmup:
            samples.append(elapsed)
            results.append(result)
    return Latency.of(samples), results


def check_results(results: list[ToolResult]) -> None:
    """Telemetry trouble changed no answer."""
    assert all(result.ok and result.status == "succeeded" for result in results)
    attempts = [result.attempts for result in results]
    assert sorted(attempts) == sorted(2 if i % 5 == 0 else 1 for i in range(len(results)))


@contextmanager
def collector_endpoint(collector: Collector) -> Iterator[OtlpReceiver | str]:
    """An endpoint nobody listens on, or a receiver that answers late."""
    if collector == "down":
        yield f"http://{LOOPBACK}:{free_port()}"
        return
    with OtlpReceiver(delay_s=SLOW_COLLECTOR_DELAY_S) as receiver:
        yield receiver


def otlp_telemetry(target: OtlpReceiver | str, protocol: Protocol) -> Telemetry:
    """The SDK exporting over OTLP to ``target`` with a short export timeout."""
    if isinstance(target, OtlpReceiver):
        target = target.grpc_endpoint if protocol == "grpc" else target.http_endpoint
    return setup_telemetry(
        "toolspan-test",
        otlp=True,
        protocol=protocol,
        endpoint=target,
        set_global=False,
        export_timeout_s=EXPORT_TIMEOUT_S,
    )


@pytest.fixture(autouse=True)
def quiet_exporter_logs() -> Iterator[None]:
    # The exporters log every failed export; that is their job, not noise here.
    logger = logging.getLogger("opentelemetry.exporter")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(previous)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("collector", ["down", "slow"])
def test_a_down_or_slow_collector_costs_the_call_nothing(
    collector: Collector, protocol: Protocol, record_property: Any
) -> None:
    no_export = setup_telemetry("toolspan-test", otlp=False, set_global=False)
    baseline, _ = execute_many(no_export.tracer_provider, MEASURED_CALLS)
    no_export.shutdown()

    with collector_endpoint(collector) as target:
        telemetry = otlp_telemetry(target, protocol)
        # Not vacuous: the OTLP exporter really is in the pipeline.
        assert telemetry.exporters == ["otlp-grpc" if protocol == "grpc" else "otlp-http"]
        latency, results = execute_many(telemetry.tracer_provider, MEASURED_CALLS)
        started = time.monotonic()
        telemetry.shutdown()
        shutdown_s = time.monotonic() - started
        if isinstance(target, OtlpReceiver):
            assert target.requests, "the slow collector never saw an export attempt"

    check_results(results)
    report = (
        f"collector {collector}, {protocol}: no exporter {baseline}; "
        f"with exporter {latency}; shutdown {shutdown_s:.2f} s"
    )
    print(report)
    record_property("latency", report)
    # Generous bounds (a 2-core CI box is noisy); the typical cost is a few us.
    assert latency.p50_us <= 2 * baseline.p50_us + 200, report
    # Shutdown is bounded by the export timeout, however much is queued.
    assert shutdown_s <= EXPORT_TIMEOUT_S + 0.5, report


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("collector", ["down", "slow"])
def test_shutdown_with_one_batch_pending_takes_about_the_export_timeout(
    collector: Collector, protocol: Protocol
) -> None:
    with collector_endpoint(collector) as target:
        telemetry = otlp_telemetry(target, protocol)
        # 120 spans: less than one batch (512), so nothing is exported before
        # shutdown and shutdown makes exactly one export attempt.
        _, results = execute_many(telemetry.tracer_provider, 50, warmup=0)
        started = time.monotonic()
        telemetry.shutdown()
        shutdown_s = time.monotonic() - started
    check_results(results)
    assert shutdown_s <= EXPORT_TIMEOUT_S + 0.5, f"shutdown took {shutdown_s:.2f} s"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_shutdown_with_the_collector_down_takes_a_second_and_says_once_what_was_dropped(
    protocol: Protocol, caplog: pytest.LogCaptureFixture
) -> None:
    # The defaults (export timeout 5 s), the real exporter, a closed port.
    logging.getLogger("opentelemetry.exporter").setLevel(logging.NOTSET)
    caplog.set_level(logging.WARNING)
    with collector_endpoint("down") as target:
        assert isinstance(target, str)
        telemetry = setup_telemetry(
            "toolspan-test", otlp=True, protocol=protocol, endpoint=target, set_global=False
        )
        _, results = execute_many(telemetry.tracer_provider, 50, warmup=0)
        started = time.monotonic()
        assert telemetry.shutdown() is False
        shutdown_s = time.monotonic() - started
        time.sleep(0.5)  # the exporter's thread, given up on, must stay quiet too
    check_results(results)
    assert shutdown_s <= 1.5, f"shutdown took {shutdown_s:.2f} s"
    label = "otlp-grpc" if protocol == "grpc" else "otlp-http"
    records = [(r.name, r.getMessage()) for r in caplog.records]
    ((name, line),) = records  # no exporter retry warnings: one line
    assert name == "toolspan.tracer"
    spans = len(results) + sum(r.attempts for r in results)  # a call span, one per attempt
    assert line.startswith(
        f"telemetry shutdown: {spans} of {spans} span(s) not exported to {label} ("
    )
    assert "\n" not in line
    assert line.endswith("shutdown gave up after 1.0 s)")
    exporter_logger = logging.getLogger("opentelemetry.exporter.otlp.common.http")
    assert not exporter_logger.filters  # held back during shutdown only


def test_in_normal_running_the_exporter_still_logs_its_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logging.getLogger("opentelemetry.exporter").setLevel(logging.NOTSET)
    caplog.set_level(logging.WARNING)
    with collector_endpoint("down") as target:
        telemetry = otlp_telemetry(target, "http/protobuf")
        execute_many(telemetry.tracer_provider, 5, warmup=0)
        telemetry.force_flush()
        flushed = [r for r in caplog.records if r.name.startswith("opentelemetry.exporter")]
        telemetry.shutdown()
    assert flushed, "the exporter's own warnings were hidden outside shutdown"
