"""Benchmark: `toolspan serve --clickhouse`'s writer, spans per second into an
embedded chDB table, against a floor measured in the same run.

Takes the first file of the analyzer benchmark's corpus (bench/analyzer_bench.py,
OTLP/JSON lines, 125,000 spans of 1M) as a sealed spool segment and times:

  floor    inserting the same spans, already mapped to the exporter's rows,
           through the same client (what ClickHouse itself costs)
  writer   ClickHouseWriter.cycle(): read the segment, map every request as
           the collector's exporter does, insert (what serve --clickhouse does)

each into a fresh table, best of --repeats, and the time mapping alone takes
(with Python's cyclic collector paused, as the writer maps).

Usage: python bench/clickhouse_writer_bench.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import analyzer_bench  # noqa: E402
import clickhouse_connect  # noqa: E402

from toolspan.analyzer._exporter_table import (  # noqa: E402
    create_table,
    insert_rows,
    rows_from_request,
)
from toolspan.analyzer._model import collector_paused  # noqa: E402
from toolspan.serve._clickhouse import ClickHouseWriter  # noqa: E402
from toolspan.serve._spool import Spool  # noqa: E402

CHUNK = 20_000  # as the writer inserts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    segment_source = analyzer_bench.generate(1_000_000, 8)[0]
    lines = segment_source.read_bytes().splitlines()
    started = time.perf_counter()
    with collector_paused():  # as the writer maps a segment
        rows = [row for line in lines for row in rows_from_request(orjson.loads(line))]
    mapping_s = time.perf_counter() - started
    work = Path(tempfile.mkdtemp(prefix="toolspan-writer-bench-"))
    try:
        client = clickhouse_connect.get_client(dsn=f"chdb://{work / 'chdb'}")
        client.command("CREATE DATABASE floor")
        floor_s = float("inf")
        for _ in range(args.repeats):
            client.command("DROP TABLE IF EXISTS floor.otel_traces")
            create_table(client, "floor.otel_traces")
            started = time.perf_counter()
            for start in range(0, len(rows), CHUNK):
                insert_rows(client, rows[start : start + CHUNK], "floor.otel_traces")
            floor_s = min(floor_s, time.perf_counter() - started)
        writer_s = float("inf")
        for attempt in range(args.repeats):
            spool_dir = work / f"spool-{attempt}"
            spool_dir.mkdir()
            shutil.copy(segment_source, spool_dir / "spans-0000000001.jsonl")
            spool = Spool(spool_dir).open()
            database = f"written_{attempt}"
            source = f"chdb:{work / 'chdb'}?database={database}"
            writer = ClickHouseWriter(spool, source, spool_dir).open()
            started = time.perf_counter()
            writer.cycle()
            writer_s = min(writer_s, time.perf_counter() - started)
            writer.close()
            spool.close()
            if writer.spans != len(rows):
                raise SystemExit(f"the writer wrote {writer.spans:,} of {len(rows):,} spans")
        client.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    spans = len(rows)
    print(f"{spans:,} spans ({segment_source.name}), best of {args.repeats}")
    print(f"floor  (insert of mapped rows)  {floor_s:6.2f} s  {spans / floor_s:>9,.0f} spans/s")
    print(
        f"writer (read, map, insert)      {writer_s:6.2f} s  {spans / writer_s:>9,.0f} spans/s"
        f"  {writer_s / floor_s:.1f}x the floor; mapping alone {mapping_s:.2f} s"
    )


if __name__ == "__main__":
    main()
