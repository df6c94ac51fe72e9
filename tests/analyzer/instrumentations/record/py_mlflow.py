"""Records the scripted support agent through MLflow tracing (``mlflow-tracing``)
and its OTLP export, offline.

    .venv/bin/python -m tests.analyzer.instrumentations.record.py_mlflow mlflow on|off OUT

Prints ``{"traces": {trace_id: scenario}, "versions": {...}}`` as record_py does.
MLflow exports over OTLP when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set
(``grpc`` or ``http/protobuf`` only, no file exporter): here it points at an
OTLP/HTTP receiver on 127.0.0.1 started in this process, which turns each
request into one OTLP/JSON line with toolspan serve's own converter
(``toolspan.serve._otlp``, what ``toolspan serve`` does with the same bytes).

The agent is the app's own loop over a scripted model, traced the way MLflow's
users trace one: ``@mlflow.trace(span_type=SpanType.AGENT)`` on the run,
``SpanType.TOOL`` on each tool, ``mlflow.update_current_trace(session_id=...)``
for the conversation. MLflow has no content-capture switch: capture ``off`` is
its documented redaction hook, ``mlflow.tracing.configure(span_processors=[...])``,
replacing every span's inputs and outputs with ``[REDACTED]``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from .record_py import SCENARIO, Call, Scenarios, Tools, otlp_receiver

PACKAGES = ("mlflow-tracing", "opentelemetry-sdk")


def _redact(span: Any) -> None:
    """Capture off: MLflow's redaction hook keeps no tool input or output."""
    span.set_inputs("[REDACTED]")
    span.set_outputs("[REDACTED]")


def _run(stack: str, scenario: str, script: list[Call]) -> None:
    import mlflow
    from mlflow.entities import SpanType

    impl = Tools()

    @mlflow.trace(span_type=SpanType.TOOL)
    def get_order(order_id: str) -> dict[str, Any]:
        return impl.get_order(order_id)

    @mlflow.trace(span_type=SpanType.TOOL)
    def send_email(to: str, body: str) -> dict[str, Any]:
        return impl.send_email(to, body)

    @mlflow.trace(span_type=SpanType.TOOL)
    def charge(order: str, amount: float) -> dict[str, Any]:
        return impl.charge(order, amount)

    tools: dict[str, Callable[..., Any]] = {
        "get_order": get_order,
        "send_email": send_email,
        "charge": charge,
    }

    @mlflow.trace(name="support-agent", span_type=SpanType.AGENT)
    def agent(question: str) -> str:
        mlflow.update_current_trace(session_id=f"conv-{scenario}-{stack}")
        for tool, args in script:
            try:
                tools[tool](**args)
            except TimeoutError:
                # As an app does: the timeout goes back to the model, the run goes on.
                continue
        return "done"

    agent("Help the customer with order A1.")


def record(stack: str, capture: str, out: Path) -> dict[str, Any]:
    with otlp_receiver(out) as base:
        url = f"{base}/v1/traces"
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = url
        os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
        os.environ["OTEL_SERVICE_NAME"] = f"support-agent-{stack}"
        # With no tracking URI, mlflow-tracing 3.17.2 probes ./mlruns through the
        # file store, which imports sqlparse (not one of its dependencies) and
        # fails. Only OTLP is exported (no dual export): this URI is never asked.
        os.environ["MLFLOW_TRACKING_URI"] = url.removesuffix("/v1/traces")
        import mlflow
        from mlflow.tracing.provider import get_bridged_tracer_provider

        if capture == "off":
            mlflow.tracing.configure(span_processors=[_redact])
        provider = get_bridged_tracer_provider()
        scenarios = Scenarios()
        provider.add_span_processor(scenarios)  # type: ignore[attr-defined]
        for scenario, calls in SCENARIO["scenarios"].items():
            scenarios.current = scenario
            _run(stack, scenario, [(tool, args) for tool, args in calls])
        # MLflow's OTLP processor batches: send everything before the receiver stops.
        provider.force_flush()  # type: ignore[attr-defined]
    return {"traces": scenarios.traces, "versions": {name: version(name) for name in PACKAGES}}


if __name__ == "__main__":
    stack, capture, out = sys.argv[1:4]
    Path(out).unlink(missing_ok=True)
    print(json.dumps(record(stack, capture, Path(out))))
