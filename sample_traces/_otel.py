"""Deterministic OpenTelemetry plumbing for generated sample traces.

Real SDK, real official OTLP/JSON file encoder; only the randomness is
pinned: span and trace ids come from a seeded generator, the resource has no
per-process instance id, and span times come from the fake clocks. That is
what makes "regenerate and compare" possible.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from pathlib import Path

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

__all__ = ["DeterministicTelemetry", "SeededIdGenerator"]

# 2026-01-05 09:00:00 UTC: the sample traces' day.
BASE_EPOCH_S = 1_767_603_600.0


class SeededIdGenerator(IdGenerator):
    """Trace and span ids from a seeded generator (never for production)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1


class DeterministicTelemetry:
    """A tracer provider whose spans are kept in memory, then written as OTLP/JSON."""

    def __init__(
        self,
        *,
        service_name: str = "bicycle-agent",
        seed: int = 2026,
        also_to: SpanExporter | None = None,
    ) -> None:
        resource = Resource({"service.name": service_name, "service.version": "0.1.0"})
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=resource, id_generator=SeededIdGenerator(seed))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        if also_to is not None:
            # The live demo: each span is also exported (over OTLP) as it ends.
            self.provider.add_span_processor(SimpleSpanProcessor(also_to))

    @staticmethod
    def epoch_for(label: str, spacing_s: float = 3600.0) -> float:
        """A stable wall-clock start for ``label``, within one day of the base."""
        digest = int(hashlib.sha256(label.encode()).hexdigest()[:8], 16)
        return BASE_EPOCH_S + (digest % 24) * spacing_s / 24 + (digest % 997)

    def spans(self) -> list[ReadableSpan]:
        return sorted(
            self.exporter.get_finished_spans(),
            key=lambda span: (span.start_time or 0, span.context.span_id),
        )

    def write_jsonl(self, path: Path) -> int:
        """Write one ExportTraceServiceRequest line per trace; returns the span count."""
        by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
        spans = self.spans()
        for span in spans:
            by_trace[span.context.trace_id].append(span)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as stream:
            exporter = FileSpanExporter(stream=stream)
            for trace_spans in by_trace.values():
                exporter.export(trace_spans)
        return len(spans)
