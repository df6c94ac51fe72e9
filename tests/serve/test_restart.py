"""SIGKILL in the middle of a stream of exports, then a restart: every
acknowledged span is in the database exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.services import free_port, wait_for_port
from toolspan.analyzer import Analyzer

pytestmark = pytest.mark.slow


def _request(batch: int, size: int = 20) -> tuple[bytes, list[str]]:
    request = ExportTraceServiceRequest()
    spans = request.resource_spans.add().scope_spans.add().spans
    ids = []
    for number in range(size):
        span = spans.add()
        span.trace_id = os.urandom(16)
        span.span_id = os.urandom(8)
        span.name = f"execute_tool lookup-{batch}"
        span.start_time_unix_nano = time.time_ns()
        span.end_time_unix_nano = span.start_time_unix_nano + number
        ids.append(span.span_id.hex())
    return request.SerializeToString(), ids


def _serve(directory, http_port):
    command = [
        sys.executable, "-m", "toolspan.cli", "serve", "--dir", str(directory),
        "--http-port", str(http_port), "--grpc-port", str(free_port()), "--port", "0",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    wait_for_port(http_port, timeout_s=30)
    return process


def _post_until(stop, url, acknowledged):
    batch = 0
    with httpx.Client() as client:
        while not stop.is_set():
            body, ids = _request(batch)
            batch += 1
            try:
                response = client.post(
                    url, content=body, headers={"content-type": "application/x-protobuf"}
                )
            except httpx.HTTPError:
                continue  # not acknowledged: may or may not be kept
            if response.status_code == 200:
                acknowledged.extend(ids)


def test_sigkill_and_restart_keep_every_acknowledged_span_once(tmp_path):
    directory, port = tmp_path / "spool", free_port()
    url = f"http://127.0.0.1:{port}/v1/traces"
    acknowledged: list[str] = []
    for round_number in range(2):
        process = _serve(directory, port)
        stop = threading.Event()
        client = threading.Thread(target=_post_until, args=(stop, url, acknowledged))
        client.start()
        time.sleep(1.5)
        if round_number == 0:
            process.send_signal(signal.SIGKILL)  # mid-stream, mid-ingest
            process.wait()
            stop.set()
            client.join()
        else:
            stop.set()
            client.join()
            process.send_signal(signal.SIGTERM)  # a clean stop ingests everything
            assert process.wait(timeout=30) == 0, process.stdout.read().decode()
    assert len(acknowledged) > 100
    with Analyzer(directory / "toolspan.duckdb", read_only=True) as analyzer:
        rows = analyzer.query("SELECT span_id, count(*) FROM spans GROUP BY span_id").rows
    counts = dict(rows)
    assert all(counts.get(span_id) == 1 for span_id in acknowledged)
    assert max(counts.values()) == 1
