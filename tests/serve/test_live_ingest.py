"""The continuous analyser reads the spool through the analyzer's one ingest
path: a damaged line in a segment is reported with its file and line, every
valid span around it is kept, and a restart reads nothing twice."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.exporter.otlp.json.file import FileSpanExporter

from toolspan.serve._live import LiveAnalyser
from toolspan.serve._spool import Spool

from .conftest import send_writes, tool_request


def _analyse(directory: Path, log: list[str]) -> int:
    """One pass of the analyser over the spool in ``directory``; the calls stored."""
    spool = Spool(directory).open()
    analyser = LiveAnalyser(spool, directory / "toolspan.duckdb", log=log.append).start()
    try:
        assert analyser.wait_ready(60)
        return int(analyser.summary()["summary"]["calls"])
    finally:
        analyser.stop()
        spool.close()


def test_a_damaged_spool_line_is_reported_with_file_and_line_and_the_rest_is_kept(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "spool"
    directory.mkdir()
    segment = directory / "spans-0000000001.jsonl"
    damaged = tool_request(2, 4)[:-7]  # cut inside the request: not JSON
    # A span whose id is not hex sits beside valid ones in the same request.
    mixed = tool_request(3, 2).replace(f"{3000:016x}".encode(), b"not-a-hex-span-id", 1)
    segment.write_bytes(
        b"\n".join([tool_request(1, 3), damaged, mixed, tool_request(4, 5)]) + b"\n"
    )
    log: list[str] = []
    assert _analyse(directory, log) == 3 + 1 + 5
    reported = [entry for entry in log if "skipped" in entry]
    assert any(entry.startswith(f"{segment}:2: ") for entry in reported), log
    assert any(entry.startswith(f"{segment}:3: ") and "spanId" in entry for entry in reported)
    # A restart resumes: the segment is not read again, nothing is counted twice.
    again: list[str] = []
    assert _analyse(directory, again) == 9
    assert not [entry for entry in again if "skipped" in entry]


def test_the_last_ingest_of_a_burst_reaches_the_dashboard_once_the_interval_allows(
    tmp_path: Path,
) -> None:
    """A copy is published at most once a second; data ingested inside that
    second is published by a later pass even if nothing more arrives (it was
    dropped: the dashboard never showed a duplicate write whose second call
    arrived just after the first)."""
    exported = tmp_path / "spans.jsonl"
    send_writes(FileSpanExporter(path=exported), "conv-burst")
    lines = exported.read_bytes().splitlines()
    spool = Spool(tmp_path / "spool").open()
    now = [0.0]
    snapshots = tmp_path / "snapshots"
    analyser = LiveAnalyser(
        spool, tmp_path / "db.duckdb", snapshots=snapshots, seal_age_s=0, clock=lambda: now[0]
    ).open()

    def status() -> dict[str, Any]:
        return dict(orjson.loads((snapshots / "status").read_bytes()))

    def ingest(at: float, chunk: list[bytes]) -> None:
        for line in chunk:
            spool.append(line, 1).result(10)
        now[0] = at
        assert analyser.cycle()

    try:
        ingest(5.0, lines[:1])
        assert status()["version"] == 2 and not status()["new_findings"]
        ingest(5.5, lines[1:])  # the duplicate write completes, inside the second
        assert status()["version"] == 2
        now[0] = 7.0
        assert not analyser.cycle()  # nothing new to ingest, but unpublished data
        assert status()["version"] == 3
        assert [f["kind"] for f in status()["new_findings"]] == ["duplicate_write"]
        now[0] = 9.0
        analyser.cycle()
        assert status()["version"] == 3  # nothing new: no copy
    finally:
        analyser.stop()
        spool.close()


def test_the_write_ahead_log_is_merged_once_the_analyser_is_idle(tmp_path: Path) -> None:
    """Passes commit to the write-ahead log (a checkpoint per pass cost 30% of
    the ingest); once the spool is caught up the analyser checkpoints, so a
    restart replays little and the file alone holds the rows."""
    spool = Spool(tmp_path / "spool").open()
    database = tmp_path / "live.duckdb"
    analyser = LiveAnalyser(spool, database, seal_age_s=0, interval_s=0.05).start()
    wal = database.with_name(database.name + ".wal")
    try:
        spool.append(tool_request(1, 50), 50).result(10)
        deadline = time.monotonic() + 30
        while analyser.summary()["summary"]["calls"] < 50:
            assert time.monotonic() < deadline, "not ingested within 30 s"
            time.sleep(0.05)
        while wal.exists() and wal.stat().st_size:
            assert time.monotonic() < deadline, "the log was not merged within 30 s"
            time.sleep(0.05)
    finally:
        analyser.stop()
        spool.close()
