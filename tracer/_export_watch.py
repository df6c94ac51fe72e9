"""What left the process and what did not: counts per exporter, and the
exporters' own log records gathered into one line at shutdown.

Imported by :func:`toolspan.tracer.setup_telemetry` only (it needs the SDK).
In normal running the exporters log every failed export themselves; at
shutdown, with a collector down, they would log each retry of the last batch
(several lines each, on a thread that outlives the wait), so there the
records are held back and :func:`dropped_line` says once what was lost and why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["EndedSpans", "ExporterLogs", "TalliedExporter", "dropped_line"]

# The loggers whose records are held back at shutdown: the exporters' and the
# SDK's batch processor's (which logs an exporter's exception).
_LOGGER_PREFIXES = ("opentelemetry.exporter", "opentelemetry.sdk")
_REASON_CHARS = 300


class EndedSpans(SpanProcessor):
    """Counts the spans that ended: what every exporter was offered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.count += 1


class TalliedExporter(SpanExporter):
    """An exporter that counts the spans its exporter took."""

    def __init__(self, label: str, exporter: SpanExporter) -> None:
        self.label = label
        self.exporter = exporter
        self.exported = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.exporter.export(spans)
        if result is SpanExportResult.SUCCESS:
            with self._lock:
                self.exported += len(spans)
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


class ExporterLogs(logging.Filter):
    """Holds back the SDK's and the exporters' log records, keeping the first
    warning's first line as the reason an export failed (the later ones are
    its retries, and the noise of giving up)."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and self.first is None:
            message = record.getMessage().strip().splitlines()
            self.first = message[0] if message else record.levelname
        return False

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Hold back the records while the block runs (filters sit on each
        logger: a logger's filter does not see its children's records)."""
        manager = logging.Logger.manager
        loggers = [
            logger
            for name, logger in list(manager.loggerDict.items())
            if name.startswith(_LOGGER_PREFIXES) and isinstance(logger, logging.Logger)
        ]
        for logger in loggers:
            logger.addFilter(self)
        try:
            yield
        finally:
            for logger in loggers:
                logger.removeFilter(self)


def dropped_line(
    ended: int, exporters: Sequence[TalliedExporter], reason: str | None, gave_up_s: float | None
) -> str | None:
    """One line: how many spans each exporter did not take, and why; None if none."""
    lost = [(e.label, ended - e.exported) for e in exporters if ended > e.exported]
    if not lost:
        return None
    where = ", ".join(f"{n} of {ended} span(s) not exported to {label}" for label, n in lost)
    why = []
    if reason:
        shown = reason if len(reason) <= _REASON_CHARS else reason[: _REASON_CHARS - 3] + "..."
        why.append(f"exporter: {shown}")
    if gave_up_s is not None:
        why.append(f"shutdown gave up after {gave_up_s:.1f} s")
    return f"telemetry shutdown: {where}" + (f" ({'; '.join(why)})" if why else "")
