"""The one helper that sets up the OpenTelemetry SDK for toolspan.

Library code depends on ``opentelemetry-api`` only; this module imports the
SDK and exporters lazily (extra ``toolspan[otel]``). Spans leave the process
on a background thread (``BatchSpanProcessor``), so a collector that is down
or slow never blocks or breaks a tool call: the exporter logs and drops.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .._extras import install_hint
from ._errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from ._export_watch import EndedSpans, TalliedExporter

__all__ = ["Telemetry", "setup_telemetry"]

_log = logging.getLogger("toolspan.tracer")

Protocol = Literal["grpc", "http/protobuf"]


@dataclass
class Telemetry:
    """What :func:`setup_telemetry` built.

    :meth:`shutdown` runs at interpreter exit too, bounded by
    ``shutdown_timeout_s`` (1 s): a dead collector never holds a process
    hostage, and what it did not take is said once, in one log line.
    """

    tracer_provider: TracerProvider
    meter_provider: MeterProvider | None = None
    exporters: list[str] = field(default_factory=list)
    export_timeout_s: float = 5.0
    shutdown_timeout_s: float = 1.0
    _watch: _Watch | None = None
    _closed: bool = False

    def force_flush(self, timeout_s: float | None = None) -> bool:
        """Export everything pending; False when that did not finish in time."""
        timeout = self.export_timeout_s if timeout_s is None else timeout_s
        millis = int(timeout * 1000)
        jobs: list[Callable[[], object]] = [lambda: self.tracer_provider.force_flush(millis)]
        if self.meter_provider is not None:
            meters = self.meter_provider
            jobs.append(lambda: meters.force_flush(millis))
        return _bounded(jobs, timeout, "flush")

    def shutdown(self, timeout_s: float | None = None) -> bool:
        """Flush and close every exporter, waiting at most ``timeout_s``
        (default: the shorter of ``shutdown_timeout_s`` and the export timeout).

        Returns False when the exporters did not finish in time; what was
        still queued is then dropped. Spans an exporter did not take are
        counted and logged in one line with the reason; the exporters' own
        retry warnings are held back meanwhile.
        """
        if self._closed:
            return True
        self._closed = True
        if timeout_s is None:
            timeout_s = min(self.shutdown_timeout_s, self.export_timeout_s)
        jobs: list[Callable[[], object]] = [self.tracer_provider.shutdown]
        if self.meter_provider is not None:
            jobs.append(self.meter_provider.shutdown)
        if self._watch is None:
            return _bounded(jobs, timeout_s, "shutdown")
        return self._watch.shutdown(jobs, timeout_s)


def _bounded(jobs: list[Callable[[], object]], timeout_s: float, what: str) -> bool:
    # The SDK's own flush and shutdown ignore their timeouts while an exporter
    # retries; a daemon thread keeps the caller's wait bounded.
    def run() -> None:
        for job in jobs:
            job()

    worker = threading.Thread(target=run, name=f"toolspan-telemetry-{what}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        _log.warning(
            "telemetry %s did not finish in %.1f s; pending spans dropped", what, timeout_s
        )
        return False
    return True


@dataclass
class _Watch:
    """Counts what was offered and taken per exporter (``_export_watch``)."""

    ended: EndedSpans
    exporters: list[TalliedExporter] = field(default_factory=list)

    def shutdown(self, jobs: list[Callable[[], object]], timeout_s: float) -> bool:
        from ._export_watch import ExporterLogs, dropped_line

        logs = ExporterLogs()
        done = threading.Event()

        def run() -> None:
            with logs.holding():
                for job in jobs:
                    job()
                done.set()

        worker = threading.Thread(target=run, name="toolspan-telemetry-shutdown", daemon=True)
        worker.start()
        finished = done.wait(timeout_s)
        if not finished:
            # End the exporters' retry waits: the last batch is given up now,
            # not after the daemon thread's next backoff.
            for exporter in self.exporters:
                with contextlib.suppress(Exception):
                    exporter.exporter.shutdown()
            worker.join(0.2)
        line = dropped_line(
            self.ended.count, self.exporters, logs.first, None if finished else timeout_s
        )
        if line:
            _log.warning("%s", line)
        elif not finished:
            _log.warning("telemetry shutdown did not finish in %.1f s", timeout_s)
        return finished


def setup_telemetry(
    service_name: str = "toolspan-agent",
    *,
    json_path: str | os.PathLike[str] | None = None,
    otlp: bool | None = None,
    protocol: Protocol | None = None,
    endpoint: str | None = None,
    resource_attributes: Mapping[str, Any] | None = None,
    metrics: bool = False,
    set_global: bool = True,
    export_timeout_s: float = 5.0,
    shutdown_timeout_s: float = 1.0,
) -> Telemetry:
    """Create a ``TracerProvider`` exporting toolspan's spans.

    * ``json_path``: append OTLP/JSON lines (the Collector file exporter's
      format, via the official ``opentelemetry-exporter-otlp-json-file``).
    * ``otlp``: export over OTLP. ``None`` (default) means "when
      ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or its traces variant) is set". The
      standard ``OTEL_EXPORTER_OTLP_*`` variables are honoured; ``protocol``
      and ``endpoint`` override them.
    * ``metrics``: also build a ``MeterProvider`` exporting the same way
      (see :class:`toolspan.tracer.MetricsHook`).
    * ``shutdown_timeout_s``: how long :meth:`Telemetry.shutdown` (also run
      at exit) waits for the last exports; then it gives up, and one log line
      says how many spans each exporter did not take and why.
    """
    try:
        from opentelemetry import metrics as metrics_api
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            f"setup_telemetry needs the OpenTelemetry SDK: {install_hint('otel')}"
        ) from exc

    resource = Resource.create({"service.name": service_name, **(resource_attributes or {})})
    # Shut down by Telemetry (bounded) at exit, not by the SDK's unbounded hook.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    from ._export_watch import EndedSpans, TalliedExporter

    watch = _Watch(EndedSpans())
    provider.add_span_processor(watch.ended)
    telemetry = Telemetry(
        tracer_provider=provider,
        export_timeout_s=export_timeout_s,
        shutdown_timeout_s=shutdown_timeout_s,
        _watch=watch,
    )
    timeout_ms = int(export_timeout_s * 1000)
    for label, exporter in _span_exporters(json_path, otlp, protocol, endpoint, export_timeout_s):
        tallied = TalliedExporter(label, exporter)
        watch.exporters.append(tallied)
        processor = BatchSpanProcessor(
            tallied,
            export_timeout_millis=timeout_ms,
            # Room for bursts while a collector is slow: dropping costs a log record.
            max_queue_size=8192,
        )
        provider.add_span_processor(processor)
        telemetry.exporters.append(label)
    if metrics:
        telemetry.meter_provider = _meter_provider(
            resource, json_path, otlp, protocol, endpoint, export_timeout_s
        )
    atexit.register(telemetry.shutdown)
    if set_global:
        trace.set_tracer_provider(provider)
        if telemetry.meter_provider is not None:
            metrics_api.set_meter_provider(telemetry.meter_provider)
    return telemetry


def _otlp_wanted(otlp: bool | None, endpoint: str | None, signal: str) -> bool:
    if otlp is not None:
        return otlp
    return bool(
        endpoint
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")
    )


def _resolve_protocol(protocol: Protocol | None, signal: str) -> Protocol:
    chosen = (
        protocol
        or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"  # the specification's default
    )
    if chosen not in ("grpc", "http/protobuf"):
        raise ConfigurationError(f"unsupported OTLP protocol {chosen!r}")
    return chosen  # type: ignore[return-value]


def _span_exporters(
    json_path: str | os.PathLike[str] | None,
    otlp: bool | None,
    protocol: Protocol | None,
    endpoint: str | None,
    timeout_s: float,
) -> list[tuple[str, SpanExporter]]:
    exporters: list[tuple[str, SpanExporter]] = []
    if json_path is not None:
        from opentelemetry.exporter.otlp.json.file import FileSpanExporter

        path = Path(json_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        exporters.append((f"otlp-json-file:{path}", FileSpanExporter(path=path)))
    if _otlp_wanted(otlp, endpoint, "TRACES"):
        chosen = _resolve_protocol(protocol, "TRACES")
        if chosen == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcSpanExporter,
            )

            exporters.append(("otlp-grpc", GrpcSpanExporter(endpoint=endpoint, timeout=timeout_s)))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as HttpSpanExporter,
            )

            http_endpoint = _http_signal_endpoint(endpoint, "traces")
            exporters.append(
                ("otlp-http", HttpSpanExporter(endpoint=http_endpoint, timeout=timeout_s))
            )
    return exporters


def _http_signal_endpoint(endpoint: str | None, signal: str) -> str | None:
    # An explicit base endpoint gets the signal path, as the env variable does.
    if endpoint is None:
        return None
    return endpoint.rstrip("/") + f"/v1/{signal}"


def _meter_provider(
    resource: Any,
    json_path: str | os.PathLike[str] | None,
    otlp: bool | None,
    protocol: Protocol | None,
    endpoint: str | None,
    timeout_s: float,
) -> MeterProvider:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        PeriodicExportingMetricReader,
    )

    exporters: list[MetricExporter] = []
    if json_path is not None:
        from opentelemetry.exporter.otlp.json.file import FileMetricExporter

        metrics_path = Path(json_path).with_suffix(".metrics.jsonl")
        exporters.append(FileMetricExporter(path=metrics_path))
    if _otlp_wanted(otlp, endpoint, "METRICS"):
        if _resolve_protocol(protocol, "METRICS") == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter as GrpcMetricExporter,
            )

            exporters.append(GrpcMetricExporter(endpoint=endpoint, timeout=timeout_s))
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter as HttpMetricExporter,
            )

            exporters.append(
                HttpMetricExporter(
                    endpoint=_http_signal_endpoint(endpoint, "metrics"), timeout=timeout_s
                )
            )
    readers = [PeriodicExportingMetricReader(exporter) for exporter in exporters]
    return MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
