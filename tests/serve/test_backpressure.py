"""Backpressure: past the lag bound the SDK exporters get "retry later"
(HTTP 503 + Retry-After, gRPC UNAVAILABLE + RetryInfo), honour it, and
nothing is lost."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .conftest import http_url, send_writes, summary, wait_for


class _Recorded(SpanExporter):
    """The real exporter, with what it sent and how each export ended."""

    def __init__(self, exporter):
        self.exporter = exporter
        self.sent = InMemorySpanExporter()
        self.results = []

    def export(self, spans):
        result = self.exporter.export(spans)
        self.results.append(result)
        self.sent.export(spans)
        return result

    def shutdown(self):
        self.exporter.shutdown()


def _check_nothing_lost(server, recorded):
    assert recorded.results
    assert set(recorded.results) == {SpanExportResult.SUCCESS}
    # The exporter was told to retry later at least once, and came back.
    assert server.spool.refused >= 1
    sent = {span.context.span_id for span in recorded.sent.get_finished_spans()}
    wait_for(lambda: summary(server)["summary"]["spans"] == len(sent))


def test_the_http_exporter_retries_after_503_and_nothing_is_lost(serve):
    # Any unanalysed byte is too much: every export right after another waits.
    server = serve(max_lag_bytes=1)
    recorded = _Recorded(HttpExporter(endpoint=http_url(server)))
    send_writes(recorded, "conv-pressure-http")
    _check_nothing_lost(server, recorded)


def test_the_grpc_exporter_retries_after_unavailable_and_nothing_is_lost(serve):
    server = serve(max_lag_bytes=1, retry_after_s=0.5)
    endpoint = f"127.0.0.1:{server.settings.grpc_port}"
    recorded = _Recorded(GrpcExporter(endpoint=endpoint, insecure=True))
    send_writes(recorded, "conv-pressure-grpc")
    _check_nothing_lost(server, recorded)
