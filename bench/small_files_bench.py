"""Per-file overhead of ``Analyzer.ingest``: many one-span files against one file.

Writes N files of one OTLP/JSON line with one span each (the shape a process
per tool call, or a collector rotating often, leaves behind), and the same
lines concatenated into one file (the floor: the same bytes, no per-file
cost). Both are ingested into a fresh in-memory database, best of the repeats.

    .venv/bin/python bench/small_files_bench.py [--files 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import orjson

from toolspan.analyzer import Analyzer


def _line(n: int) -> bytes:
    span = {
        "traceId": f"{n:032x}",
        "spanId": f"{n:016x}",
        "name": "execute_tool get_weather",
        "kind": 1,
        "startTimeUnixNano": str(1_767_225_600_000_000_000 + n * 1_000_000),
        "endTimeUnixNano": str(1_767_225_600_000_000_000 + n * 1_000_000 + 500_000),
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "get_weather"}},
            {"key": "gen_ai.conversation.id", "value": {"stringValue": f"conv-{n % 97}"}},
            {"key": "toolspan.status", "value": {"stringValue": "succeeded"}},
        ],
        "status": {"code": 1},
    }
    request = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "b"}}]
                },
                "scopeSpans": [{"scope": {"name": "toolspan"}, "spans": [span]}],
            }
        ]
    }
    return orjson.dumps(request) + b"\n"


def _ingest_seconds(path: Path, repeats: int) -> tuple[float, int]:
    best, spans = float("inf"), 0
    for _ in range(repeats):
        started = time.perf_counter()
        with Analyzer() as analyzer:
            spans = analyzer.ingest([path]).spans
        best = min(best, time.perf_counter() - started)
    return best, spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolspan-small-files-") as scratch:
        many, one = Path(scratch) / "many", Path(scratch) / "one"
        many.mkdir()
        one.mkdir()
        lines = [_line(n) for n in range(1, args.files + 1)]
        for n, text in enumerate(lines, start=1):
            (many / f"call-{n:06d}.jsonl").write_bytes(text)
        (one / "all.jsonl").write_bytes(b"".join(lines))
        size_mb = sum(len(text) for text in lines) / 1e6
        floor, floor_spans = _ingest_seconds(one, args.repeats)
        files, file_spans = _ingest_seconds(many, args.repeats)
    assert floor_spans == file_spans == args.files
    print(f"{args.files:,} one-span files, {size_mb:.1f} MB, best of {args.repeats}")
    print(f"{'variant':<34} {'seconds':>8} {'x floor':>8}")
    print(f"{'one file (floor)':<34} {floor:>8.2f} {1.0:>7.2f}x")
    print(f"{f'{args.files:,} files':<34} {files:>8.2f} {files / floor:>7.2f}x")
    print(f"per-file overhead: {(files - floor) / args.files * 1e6:.0f} us")


if __name__ == "__main__":
    main()
