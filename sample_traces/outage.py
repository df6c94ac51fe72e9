"""Three minutes of a carrier API outage behind a retry budget and a circuit breaker.

A tracking agent asks the carrier where a parcel is every 3 s (one order
each time, in six conversations), through an executor with a
:class:`RetryBudget` and a :class:`CircuitBreaker` kept for the ``carrier``
service. From minute 1 to minute 2 the carrier answers 503: the budget lets
about one retry in 10 s through and refuses the rest (status
``retry_budget``), the breaker opens and fails calls fast (``circuit_open``)
until a half-open probe finds the carrier back. It is what makes the
dashboard's "Retry budget and circuit breaker by service" panel show in
``make demo``. Reads only, each call a different order: nothing to find.
"""

from __future__ import annotations

import random
from pathlib import Path

from opentelemetry.sdk.trace.export import SpanExporter

from toolspan.tracer import CircuitBreaker, Executor, RetryBudget, Tool, ToolCall, ToolError
from toolspan.tracer.testing import FakeClock

from ._otel import DeterministicTelemetry

__all__ = ["CALL_EVERY_S", "DURATION_S", "OUTAGE", "generate"]

DURATION_S = 180.0
CALL_EVERY_S = 3.0
OUTAGE = (60.0, 120.0)  # seconds after the start: the carrier answers 503
_LATENCY_S = 0.08
_CONVERSATIONS = 6


def generate(out: Path, *, also_to: SpanExporter | None = None) -> int:
    """Run the three minutes and write ``traces.jsonl``; returns the span count.
    ``also_to`` also gets every span as it ends (the live demo's OTLP exporter)."""
    telemetry = DeterministicTelemetry(service_name="tracking-agent", seed=29, also_to=also_to)
    clock = FakeClock(epoch_s=telemetry.epoch_for("outage"))

    def track_shipment(order_id: str) -> dict[str, str]:
        clock.advance(_LATENCY_S)
        if OUTAGE[0] <= clock.now < OUTAGE[1]:
            raise ToolError.from_status(503)
        return {"order_id": order_id, "status": "in_transit"}

    executor = Executor(
        [Tool("track_shipment", track_shipment, service="carrier")],
        tracer_provider=telemetry.provider,
        sleep=clock.sleep,
        clock=clock,
        span_clock=clock.time_ns,
        rng=random.Random(29),
        retry_budget=RetryBudget(0.2, 0.05, 10.0, clock=clock),
        circuit_breaker=CircuitBreaker(0.5, 5, 30.0, 20.0, clock=clock, rng=random.Random(30)),
    )
    n = 0
    while clock.now < DURATION_S:
        executor.execute(
            ToolCall(
                "track_shipment",
                f"call_{n:03d}",
                {"order_id": f"B-{2000 + n}"},
                conversation_id=f"conv-outage-{n % _CONVERSATIONS}",
                # Every attempt traceable by the request it served (the contract's ids).
                request_id=f"req-outage-{n:03d}",
                turn_id=f"turn-outage-{n:03d}-1",
            )
        )
        n += 1
        clock.advance(max(0.0, n * CALL_EVERY_S - clock.now))
    return telemetry.write_jsonl(out / "traces.jsonl")
