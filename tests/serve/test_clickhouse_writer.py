"""``toolspan serve --clickhouse``: what the receiver accepts is written into the
collector exporter's otel_traces, once (a restart writes nothing twice), a
damaged spool line is reported with its file and line and the rest is written,
a ClickHouse that fails is retried without the receiver noticing, and the
dashboard on the same source follows what arrives. Embedded chDB, and a real
server too with CLICKHOUSE_URL."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from tests.clickhouse_backend import Backend, unique
from toolspan.analyzer._clickhouse import ClickHouseAnalyzer
from toolspan.analyzer._exporter_table import create_table
from toolspan.serve import Server
from toolspan.serve._clickhouse import ClickHouseWriter
from toolspan.serve._spool import Spool
from toolspan.tracer.testing import FakeClock

from .conftest import http_url, send_writes, tool_request

pytest.importorskip("clickhouse_connect")
pytest.importorskip("chdb")


class Target:
    """A database of its own for the written table, and a client to look at it."""

    def __init__(self, backend: Backend) -> None:
        self.backend, self.database = backend, unique("w")
        self.client = backend.client()
        self.client.command(f"CREATE DATABASE {self.database}")

    @property
    def source(self) -> str:
        return self.backend.source(self.database)

    def count(self) -> int:
        query = f"SELECT count() FROM {self.database}.otel_traces"
        return int(self.client.query(query).result_rows[0][0])

    def wait_for(self, rows: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.count() < rows:
            assert time.monotonic() < deadline, f"{self.count()} rows, waited for {rows}"
            time.sleep(0.1)


@pytest.fixture
def target(clickhouse: Backend) -> Iterator[Target]:
    made = Target(clickhouse)
    try:
        yield made
    finally:
        made.client.command(f"DROP DATABASE IF EXISTS {made.database}")
        made.client.close()


def _write(directory: Path, target: Target, log: list[str]) -> ClickHouseWriter:
    """One writer pass over the spool in ``directory``."""
    spool = Spool(directory).open()
    writer = ClickHouseWriter(spool, target.source, directory, log=log.append)
    try:
        writer.start()
        writer.stop()  # its last pass writes what is sealed
    finally:
        spool.close()
    return writer


def test_segments_are_written_once_as_the_exporter_writes_them(
    tmp_path: Path, target: Target
) -> None:
    target.client.command(f"DROP DATABASE {target.database}")  # made by the writer
    directory = tmp_path / "spool"
    directory.mkdir()
    first = directory / "spans-0000000001.jsonl"
    damaged = tool_request(2, 4)[:-7]  # cut inside the request: not JSON
    first.write_bytes(b"\n".join([tool_request(1, 3), damaged, tool_request(3, 5)]) + b"\n")
    log: list[str] = []
    writer = _write(directory, target, log)
    assert (writer.written, writer.spans, target.count()) == (1, 8, 8)
    assert any(entry.startswith(f"{first}:2: not written") for entry in log), log
    # The exporter's columns and value mapping: an int attribute is its text.
    row = target.client.query(
        f"SELECT TraceId, SpanName, SpanAttributes['retries'], StatusCode, Duration"
        f" FROM {target.database}.otel_traces ORDER BY SpanId LIMIT 1"
    ).result_rows[0]
    assert row == (f"{1:032x}", "execute_tool lookup", "2", "Unset", 1_000_000)
    # A restart resumes after the last segment written: nothing twice.
    assert _write(directory, target, []).spans == 0
    (directory / "spans-0000000003.jsonl").write_bytes(tool_request(4, 2) + b"\n")
    assert _write(directory, target, []).spans == 2
    assert target.count() == 10
    # The analysis reads the written table as the collector's.
    with ClickHouseAnalyzer(target.source) as az:
        assert az.summary()["calls"] == 10


def _request(**span: Any) -> bytes:
    values = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "execute_tool lookup",
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225600001000000",
        **span,
    }
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [values]}]}]})


def test_spans_that_cannot_be_stored_are_reported_and_the_rest_is_written(
    tmp_path: Path, target: Target
) -> None:
    # A table ClickHouse guards itself: it refuses any insert holding a span
    # named "refused" (a CHECK constraint), as it would a value it cannot store.
    table = f"{target.database}.otel_traces"
    create_table(target.client, table)
    target.client.command(f"ALTER TABLE {table} ADD CONSTRAINT named CHECK SpanName != 'refused'")
    directory = tmp_path / "spool"
    directory.mkdir()
    segment = directory / "spans-0000000001.jsonl"
    lines = [
        tool_request(1, 30),
        _request(spanId="01" * 8, name="refused"),  # ClickHouse refuses it: split out
        _request(traceId=123),  # not a request's shape
        _request(spanId="02" * 8, startTimeUnixNano="99999999999999999999"),  # past 2262
        _request(spanId="03" * 8, endTimeUnixNano="1"),  # ends before it starts
        tool_request(2, 20),
    ]
    segment.write_bytes(b"\n".join(lines) + b"\n")
    log: list[str] = []
    writer = _write(directory, target, log)
    assert writer.spans == target.count() == 50
    assert any(f"span '{'01' * 8}' of trace" in entry for entry in log), log
    assert any(entry.startswith(f"{segment}:3: not written") for entry in log), log
    for line, span in ((4, "02" * 8), (5, "03" * 8)):
        assert any(entry.startswith(f"{segment}:{line}: span '{span}'") for entry in log), log


def test_a_failing_clickhouse_is_retried_and_the_spool_keeps_the_spans(
    tmp_path: Path, target: Target
) -> None:
    directory = tmp_path / "spool"
    spool = Spool(directory).open()
    log: list[str] = []
    writer = ClickHouseWriter(spool, target.source, directory, interval_s=0.05, log=log.append)
    writer.start()
    try:
        table = f"{target.database}.otel_traces"
        target.client.command(f"RENAME TABLE {table} TO {table}_away")  # ClickHouse "fails"
        spool.append(tool_request(5, 3), 3).result(timeout=10)
        spool.seal()
        deadline = time.monotonic() + 30
        while writer.error is None:
            assert time.monotonic() < deadline, "the failure was never reported"
            time.sleep(0.05)
        assert "retried" in log[-1]
        target.client.command(f"RENAME TABLE {table}_away TO {table}")
        target.wait_for(3)
    finally:
        writer.stop()
        spool.close()
    assert writer.error is None and target.count() == 3
    # Said once while it lasted (not at every retry), and when it ended.
    assert sum("failed (retried)" in entry for entry in log) == 1, log
    assert log[-1].startswith("writing to ClickHouse again")


def test_a_table_that_is_not_the_exporters_is_a_clear_error(tmp_path: Path, target: Target) -> None:
    target.client.command(
        f"CREATE TABLE {target.database}.otel_traces (SpanAttributes String) ENGINE = Memory"
    )
    spool = Spool(tmp_path / "spool").open()
    try:
        with pytest.raises(Exception, match="not the collector exporter's otel_traces"):
            ClickHouseWriter(spool, target.source, tmp_path).start()
    finally:
        spool.close()


def test_serve_writes_what_it_receives_and_the_dashboard_follows_it(
    serve: Callable[..., Server], target: Target
) -> None:
    from toolspan.dashboard._clickhouse import ClickHouseDatabase, SourceSpec
    from toolspan.dashboard._queries import Filters, run_query

    server = serve(clickhouse=target.source)
    assert f"clickhouse {server.clickhouse.display()}" in server.describe()  # type: ignore[union-attr]
    send_writes(OTLPSpanExporter(endpoint=http_url(server)), "c-live")
    target.wait_for(4)  # two calls of one write, each with its attempt span

    clock = FakeClock()
    database = ClickHouseDatabase(SourceSpec(target.source, follow_s=5), clock=clock)
    try:

        def duplicate_writes() -> list[str]:
            params = {**Filters().params(), "kinds": [], "limit": 100, "offset": 0}
            found = run_query(database, "findings_page", params)
            return sorted(found.loc[found["kind"] == "duplicate_write", "conversation_id"])

        assert duplicate_writes() == ["c-live"]
        send_writes(OTLPSpanExporter(endpoint=http_url(server)), "c-later", times=3)
        target.wait_for(10)
        clock.now += 5
        assert database.refresh()
        assert duplicate_writes() == ["c-later", "c-live"]
    finally:
        database.close()


def test_the_command_line_names_a_source_that_cannot_be_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.services import free_port
    from toolspan.cli import main

    ports = ["--http-port", str(free_port()), "--grpc-port", str(free_port()), "--port", "0"]
    missing = tmp_path / "no-such-dir"
    argv = ["serve", "--dir", str(tmp_path / "spool"), *ports, "--clickhouse", f"chdb:{missing}"]
    assert main(argv) == 2
    assert f"--clickhouse: no chDB data directory at {missing}" in capsys.readouterr().err
    # A password in the URL never reaches the message.
    argv[-1] = "clickhouse://u:s3cret-pw@127.0.0.1:9/otel"
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot connect to clickhouse://127.0.0.1:9/otel" in err
    assert "s3cret-pw" not in err
    argv[-1] = "clickhouse://u:s3cret-pw@[::1/otel"  # does not parse
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--clickhouse: not a ClickHouse source URL" in err
    assert "s3cret-pw" not in err
    from toolspan.serve import Settings

    settings = Settings(clickhouse="clickhouse://u:s3cret-pw@h/otel", token="t0ken-value")
    assert "s3cret-pw" not in repr(settings) and "t0ken-value" not in repr(settings)
