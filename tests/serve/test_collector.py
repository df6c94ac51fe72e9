"""A real collector (rotel, from PyPI) forwarding to ``toolspan serve`` over
OTLP/gRPC and OTLP/HTTP."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

from tests.services import LOOPBACK
from tests.tracer_e2e.collector import RotelCollector

from .conftest import findings, send_writes, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("forward", ["grpc", "http"])
def test_rotel_forwards_to_serve(serve, tmp_path, forward):
    server = serve()
    target = (
        f"http://{LOOPBACK}:{server.settings.grpc_port}"
        if forward == "grpc"
        else f"http://{LOOPBACK}:{server.settings.http_port}"
    )
    with RotelCollector(target, tmp_path, forward_protocol=forward) as collector:
        exporter = GrpcExporter(endpoint=f"{LOOPBACK}:{collector.grpc_port}", insecure=True)
        send_writes(exporter, f"conv-rotel-{forward}")
        found = wait_for(
            lambda: [f for f in findings(server) if f["conversation_id"] == f"conv-rotel-{forward}"]
        )
    assert [f["kind"] for f in found] == ["duplicate_write"]
