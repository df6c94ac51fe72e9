"""OpenTelemetry metrics for the retry boundary, as an executor hook."""

from __future__ import annotations

from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider

from ._hooks import AttemptEvent, CallEvent
from ._version import __version__

__all__ = ["MetricsHook"]


class MetricsHook:
    """Counts attempts, final statuses, replays and conflicts; records delays.

    >>> telemetry = setup_telemetry(json_path="traces.jsonl", metrics=True)  # doctest: +SKIP
    >>> executor = Executor(tools, hooks=[MetricsHook(telemetry.meter_provider)])

    Instruments: ``toolspan.tool.attempts`` (tool, outcome),
    ``toolspan.tool.calls`` (tool, status), ``toolspan.tool.replays`` (tool),
    ``toolspan.tool.conflicts`` (tool) and the histogram
    ``toolspan.retry.delay`` (tool; seconds scheduled after a failed attempt).
    """

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        meter = metrics.get_meter("toolspan", __version__, meter_provider=meter_provider)
        self._attempts = meter.create_counter(
            "toolspan.tool.attempts", unit="{attempt}", description="Tool attempts by outcome"
        )
        self._calls = meter.create_counter(
            "toolspan.tool.calls", unit="{call}", description="Logical tool calls by status"
        )
        self._replays = meter.create_counter(
            "toolspan.tool.replays", unit="{call}", description="Results replayed from the store"
        )
        self._conflicts = meter.create_counter(
            "toolspan.tool.conflicts",
            unit="{call}",
            description="Idempotency keys reused with other arguments",
        )
        self._delays = meter.create_histogram(
            "toolspan.retry.delay",
            unit="s",
            description="Delay scheduled after a failed attempt",
            explicit_bucket_boundaries_advisory=[0.1, 0.25, 0.5, 1, 2, 4, 8],
        )

    def on_attempt(self, event: AttemptEvent) -> None:
        self._attempts.add(1, {"gen_ai.tool.name": event.tool, "outcome": event.outcome})
        if event.delay_s > 0:
            self._delays.record(event.delay_s, {"gen_ai.tool.name": event.tool})

    def on_call(self, event: CallEvent) -> None:
        result = event.result
        tool = {"gen_ai.tool.name": result.tool}
        self._calls.add(1, {**tool, "toolspan.status": result.status})
        if result.replayed:
            self._replays.add(1, tool)
        if result.status == "idempotency_conflict":
            self._conflicts.add(1, tool)
