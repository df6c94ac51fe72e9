"""Bad input and access: a clear status for each, and the server keeps serving."""

from __future__ import annotations

import gzip

import grpc
import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as to_protobuf
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolspan.serve import ServeError, Server, Settings

from .conftest import http_url, send_writes, summary, wait_for

PROTOBUF = {"content-type": "application/x-protobuf"}
JSON = {"content-type": "application/json"}


def _spans():
    captured = InMemorySpanExporter()
    send_writes(captured, "conv-hostile")
    return captured.get_finished_spans()


def _assert_still_serving(server, spans):
    wait_for(lambda: server.spool.lag_bytes() == 0)
    before = summary(server)["summary"]["spans"]
    good = httpx.post(
        http_url(server), content=to_protobuf(spans).SerializeToString(), headers=PROTOBUF
    )
    assert good.status_code == 200
    wait_for(lambda: summary(server)["summary"]["spans"] == before + len(spans))


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (b"\xff\xfe not protobuf", PROTOBUF, 400),
        (b'{"resourceSpans": [', JSON, 400),
        (b'["an array"]', JSON, 400),
        (b'{"resourceSpans": 5}', JSON, 400),
        (b"{}", {"content-type": "text/plain"}, 415),
        (b"{}", {}, 415),
        (b"{}", {**JSON, "content-encoding": "br"}, 415),
        (b"not gzip at all", {**JSON, "content-encoding": "gzip"}, 400),
        (gzip.compress(b"{}", mtime=0)[:-6], {**JSON, "content-encoding": "gzip"}, 400),
    ],
)
def test_bad_requests_get_a_clear_status(serve, body, headers, status):
    server = serve()
    response = httpx.post(http_url(server), content=body, headers=headers)
    assert response.status_code == status
    assert response.content  # a google.rpc.Status saying why
    _assert_still_serving(server, _spans())


def test_a_body_over_the_limit_and_a_gzip_bomb_are_refused(serve):
    server = serve(max_body_bytes=64 * 1024)
    too_big = httpx.post(http_url(server), content=b"x" * (65 * 1024), headers=JSON)
    assert too_big.status_code == 413
    bomb = gzip.compress(b" " * (50 * 1024 * 1024))  # 50 MB of spaces in ~50 KB
    assert len(bomb) < 64 * 1024
    refused = httpx.post(
        http_url(server), content=bomb, headers={**JSON, "content-encoding": "gzip"}
    )
    assert refused.status_code == 413
    assert "inflates" in refused.json()["message"]
    _assert_still_serving(server, _spans())


def test_hostile_strings_are_kept_as_data(serve):
    server = serve()
    request = encode_spans(_spans()).to_dict()
    span = request["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["name"] = "<script>alert(1)</script>\u0000\u202e'; DROP TABLE spans; --"
    response = httpx.post(http_url(server), content=orjson.dumps(request), headers=JSON)
    assert response.status_code == 200
    names = wait_for(
        lambda: (
            server.analyser.findings() is not None
            and [row[0] for row in _names(server) if "script" in row[0]]
        )
    )
    assert names == [span["name"]]


def _names(server):
    with server.analyser._lock:
        return server.analyser._analyzer.query("SELECT name FROM spans").rows


def test_grpc_bad_and_oversized_requests(serve):
    server = serve(max_body_bytes=64 * 1024)
    with grpc.insecure_channel(f"127.0.0.1:{server.settings.grpc_port}") as channel:
        stub = TraceServiceStub(channel)
        request = to_protobuf(_spans())
        request.resource_spans[0].scope_spans[0].spans[0].trace_id = b"short"
        answer = stub.Export(request)
        assert answer.partial_success.rejected_spans == 1
        assert "traceId" in answer.partial_success.error_message
        huge = ExportTraceServiceRequest()
        huge.resource_spans.add().scope_spans.add().scope.name = "x" * (100 * 1024)
        with pytest.raises(grpc.RpcError) as raised:
            stub.Export(huge)
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        raw = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda body: body,
            response_deserializer=lambda body: body,
        )
        with pytest.raises(grpc.RpcError) as raised:
            raw(b"\xff\xfe not protobuf")
        # Decoded by serve, not grpcio (which answered INTERNAL): as HTTP answers 400.
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    _assert_still_serving(server, _spans())


def test_beyond_loopback_requires_a_token(tmp_path):
    with pytest.raises(ServeError, match="--token"):
        Server(Settings(directory=tmp_path, host="0.0.0.0"))


def test_the_token_guards_both_protocols_and_the_api(serve):
    server = serve(token="s3cret")
    body = to_protobuf(_spans()).SerializeToString()
    assert httpx.post(http_url(server), content=body, headers=PROTOBUF).status_code == 401
    wrong = {**PROTOBUF, "authorization": "Bearer nope"}
    assert httpx.post(http_url(server), content=body, headers=wrong).status_code == 401
    assert httpx.get(http_url(server, "/api/v1/summary")).status_code == 401
    right = {"authorization": "Bearer s3cret"}
    assert httpx.post(http_url(server), content=body, headers={**PROTOBUF, **right}).is_success
    api = httpx.get(http_url(server, "/api/v1/summary"), headers=right)
    assert api.status_code == 200
    with grpc.insecure_channel(f"127.0.0.1:{server.settings.grpc_port}") as channel:
        stub = TraceServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raised:
            stub.Export(to_protobuf(_spans()))
        assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
        stub.Export(to_protobuf(_spans()), metadata=(("authorization", "Bearer s3cret"),))


@pytest.mark.parametrize("protocol", ["HTTP", "gRPC"])
def test_a_port_in_use_is_a_clear_error(tmp_path, protocol):
    import socket

    from tests.services import free_port

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"http_port": port, "grpc_port": free_port()}
        if protocol == "gRPC":
            ports = {"http_port": free_port(), "grpc_port": port}
        server = Server(Settings(directory=tmp_path, dashboard_port=0, **ports))
        with pytest.raises(ServeError, match=f"cannot listen for OTLP/{protocol}"):
            server.start()
