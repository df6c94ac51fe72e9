"""OTLP/gRPC under 100 calls at once (issue 41): calls past the worker pool
wait their turn instead of being refused, so a real exporter loses nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolspan.serve._spool import segments

_CALLS, _SPANS_PER_CALL = 100, 20


def _batches() -> list[list[object]]:
    """Real SDK spans, ``_CALLS`` batches of ``_SPANS_PER_CALL``."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("concurrency")
    for _ in range(_CALLS * _SPANS_PER_CALL):
        tracer.start_span("execute_tool lookup").end()
    spans = list(memory.get_finished_spans())
    return [spans[i : i + _SPANS_PER_CALL] for i in range(0, len(spans), _SPANS_PER_CALL)]


def _stored_span_ids(server) -> list[str]:
    server.spool.seal()
    ids = []
    for path in segments(server.settings.directory):
        for line in path.read_bytes().splitlines():
            for resource in orjson.loads(line)["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    ids += [span["spanId"] for span in scope["spans"]]
    return ids


@pytest.mark.slow
def test_the_python_grpc_exporter_at_100_calls_at_once_loses_nothing(serve):
    server = serve()
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{server.settings.grpc_port}", insecure=True)
    batches = _batches()
    with ThreadPoolExecutor(max_workers=_CALLS) as pool:
        results = list(pool.map(exporter.export, batches))
    exporter.shutdown()
    assert results.count(SpanExportResult.SUCCESS) == _CALLS
    stored = _stored_span_ids(server)
    sent = [f"{span.context.span_id:016x}" for batch in batches for span in batch]
    assert sorted(stored) == sorted(sent)


@pytest.mark.slow
def test_100_calls_in_flight_at_once_are_all_answered_ok(serve):
    """Straight on the gRPC channel, all 100 started before any answer is
    read: none is refused (at a limit of 32, 68 were RESOURCE_EXHAUSTED)."""
    import grpc
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    server = serve()
    # Big calls, so that each keeps a worker busy while the others arrive.
    request = encode_spans([span for batch in _batches() for span in batch])
    with grpc.insecure_channel(f"127.0.0.1:{server.settings.grpc_port}") as channel:
        stub = TraceServiceStub(channel)
        calls = [stub.Export.future(request, timeout=120) for _ in range(_CALLS)]
        codes = [call.code() for call in calls]
    assert codes == [grpc.StatusCode.OK] * _CALLS
    assert len(_stored_span_ids(server)) == _CALLS * _CALLS * _SPANS_PER_CALL


@pytest.mark.slow
def test_past_the_bound_the_python_grpc_exporter_retries_until_all_land(serve):
    """With the bound lowered to 8, many of 100 calls at once are refused with
    RESOURCE_EXHAUSTED + RetryInfo (an exporter told not to retry that code
    loses them): the Python exporter retries it after the RetryInfo's delay
    (1-2 s, spread), so every span lands once. The JS exporter does not
    (tests/serve/test_node_exporter.py)."""
    import grpc

    server = serve(max_grpc_calls=8)
    endpoint = f"127.0.0.1:{server.settings.grpc_port}"

    def send(exporter: OTLPSpanExporter) -> tuple[list[SpanExportResult], list[str]]:
        batches = _batches()
        with ThreadPoolExecutor(max_workers=_CALLS) as pool:
            results = list(pool.map(exporter.export, batches))
        exporter.shutdown()
        acknowledged = [
            f"{span.context.span_id:016x}"
            for batch, result in zip(batches, results, strict=True)
            if result is SpanExportResult.SUCCESS
            for span in batch
        ]
        return results, acknowledged

    refused, kept = send(
        OTLPSpanExporter(
            endpoint=endpoint, insecure=True, retryable_error_codes=[grpc.StatusCode.UNAVAILABLE]
        )
    )
    assert refused.count(SpanExportResult.FAILURE) > 0
    results, acknowledged = send(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    assert results.count(SpanExportResult.SUCCESS) == _CALLS
    assert sorted(_stored_span_ids(server)) == sorted(kept + acknowledged)
    assert server.grpc is not None and server.grpc.refused > 0
