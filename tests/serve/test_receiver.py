"""``toolspan serve`` receiving from the OpenTelemetry SDK's own OTLP exporters
(HTTP protobuf, gRPC, and OTLP/JSON over HTTP), with the analyser keeping the
database current and the JSON API answering from it."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta

import httpx
import orjson
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolspan.analyzer import Analyzer

from .conftest import findings, http_url, send_writes, summary, wait_for


def _duplicate_write_for(server, conversation):
    return wait_for(
        lambda: [
            f
            for f in findings(server)
            if f["kind"] == "duplicate_write" and f["conversation_id"] == conversation
        ]
    )


def test_the_sdk_http_exporter_protobuf_and_gzip(serve):
    server = serve()
    send_writes(HttpExporter(endpoint=http_url(server)), "conv-http")
    send_writes(
        HttpExporter(endpoint=http_url(server), compression=Compression.Gzip), "conv-http-gzip"
    )
    assert _duplicate_write_for(server, "conv-http")[0]["tool"] == "send_email"
    _duplicate_write_for(server, "conv-http-gzip")
    figures = summary(server)
    assert figures["summary"]["calls"] == 4
    assert figures["last_ingest"] is not None


def test_the_sdk_grpc_exporter_with_gzip(serve):
    server = serve()
    endpoint = f"127.0.0.1:{server.settings.grpc_port}"
    send_writes(GrpcExporter(endpoint=endpoint, insecure=True), "conv-grpc")
    send_writes(
        GrpcExporter(
            endpoint=endpoint,
            insecure=True,
            compression=__import__("grpc").Compression.Gzip,
        ),
        "conv-grpc-gzip",
    )
    _duplicate_write_for(server, "conv-grpc")
    _duplicate_write_for(server, "conv-grpc-gzip")


def test_otlp_json_bodies_from_the_official_json_encoder(serve):
    server = serve()
    captured = InMemorySpanExporter()
    send_writes(captured, "conv-json")
    body = orjson.dumps(encode_spans(captured.get_finished_spans()).to_dict())
    plain = httpx.post(http_url(server), content=body, headers={"content-type": "application/json"})
    assert plain.status_code == 200, plain.text
    assert plain.json() == {}
    _duplicate_write_for(server, "conv-json")
    # The same spans again, gzipped: accepted, and still each span once.
    zipped = httpx.post(
        http_url(server),
        content=gzip.compress(body),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert zipped.status_code == 200
    wait_for(lambda: summary(server)["summary"]["lines"] == 2)
    assert summary(server)["summary"]["spans"] == len(captured.get_finished_spans())


def test_protobuf_is_spooled_as_the_official_otlp_json(serve, tmp_path):
    """What the spool holds for a protobuf request reads, in the analyzer,
    exactly as the official OTLP/JSON encoding of the same spans."""
    server = serve()
    captured = InMemorySpanExporter()
    send_writes(captured, "conv-same")
    spans = captured.get_finished_spans()
    reference = tmp_path / "reference.jsonl"
    reference.write_bytes(orjson.dumps(encode_spans(spans).to_dict()) + b"\n")
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as to_pb

    response = httpx.post(
        http_url(server),
        content=to_pb(spans).SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )
    assert response.status_code == 200
    server.stop()
    columns = "trace_id, span_id, parent_span_id, name, start_time, end_time, status_code"
    query = f"SELECT {columns} FROM spans ORDER BY span_id"
    with Analyzer() as spooled, Analyzer() as official:
        spooled.ingest([server.settings.directory])
        official.ingest([reference])
        assert spooled.query(query).rows == official.query(query).rows
        assert len(spooled.query(query).rows) == len(spans)
        attributes = "SELECT span_id, attributes FROM spans ORDER BY span_id"
        assert spooled.query(attributes).rows == official.query(attributes).rows


def test_partial_success_for_bad_spans(serve):
    server = serve()
    captured = InMemorySpanExporter()
    send_writes(captured, "conv-partial")
    request = encode_spans(captured.get_finished_spans()).to_dict()
    spans = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = "not-hex"
    response = httpx.post(
        http_url(server),
        content=orjson.dumps(request),
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "spanId" in partial["errorMessage"]
    wait_for(lambda: summary(server)["summary"]["spans"] == len(spans) - 1)


def test_findings_since(serve):
    server = serve()
    send_writes(HttpExporter(endpoint=http_url(server)), "conv-since")
    _duplicate_write_for(server, "conv-since")
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    assert findings(server, since=later) == []
    earlier = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    assert findings(server, since=earlier) == findings(server)
    bad = httpx.get(http_url(server, "/api/v1/findings"), params={"since": "yesterday"})
    assert bad.status_code == 400
