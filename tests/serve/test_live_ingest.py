"""The continuous analyser reads the spool through the analyzer's one ingest
path: a damaged line in a segment is reported with its file and line, every
valid span around it is kept, and a restart reads nothing twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from toolspan.serve._live import LiveAnalyser
from toolspan.serve._spool import Spool


def _line(trace: int, spans: int) -> bytes:
    """One OTLP/JSON request of ``spans`` GenAI tool spans in one trace."""
    items: list[dict[str, Any]] = [
        {
            "traceId": f"{trace:032x}",
            "spanId": f"{trace * 1000 + n:016x}",
            "name": "execute_tool lookup",
            "startTimeUnixNano": "1767225600000000000",
            "endTimeUnixNano": "1767225600001000000",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
                {"key": "gen_ai.conversation.id", "value": {"stringValue": f"c{trace}"}},
            ],
        }
        for n in range(spans)
    ]
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": items}]}]}
    return orjson.dumps(request)


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
    damaged = _line(2, 4)[:-7]  # cut inside the request: not JSON
    # A span whose id is not hex sits beside valid ones in the same request.
    mixed = _line(3, 2).replace(f"{3000:016x}".encode(), b"not-a-hex-span-id", 1)
    segment.write_bytes(b"\n".join([_line(1, 3), damaged, mixed, _line(4, 5)]) + b"\n")
    log: list[str] = []
    assert _analyse(directory, log) == 3 + 1 + 5
    reported = [entry for entry in log if "skipped" in entry]
    assert any(entry.startswith(f"{segment}:2: ") for entry in reported), log
    assert any(entry.startswith(f"{segment}:3: ") and "spanId" in entry for entry in reported)
    # A restart resumes: the segment is not read again, nothing is counted twice.
    again: list[str] = []
    assert _analyse(directory, again) == 9
    assert not [entry for entry in again if "skipped" in entry]
