"""Benchmark: what the summary's coverage (docs/analyzer.md#coverage) costs.

Generates N spans as bench/analyzer_bench.py does (into bench/.data/), ingests
them once into a database file (kept in the temp directory for later runs),
then times ``Analyzer.summary()`` and the coverage statements alone
(``coverage_of``) in turn, 5 times each, and prints the median and minimum.

Usage: python bench/coverage_bench.py [N]   (default 1000000)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import analyzer_bench
import duckdb

from toolspan.analyzer import Analyzer
from toolspan.analyzer._analyzer import coverage_of

ROUNDS = 5


def main() -> None:
    spans = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    files = analyzer_bench.generate(spans, 8)
    db = Path(tempfile.gettempdir()) / f"toolspan_coverage_bench_{spans}.duckdb"
    if not db.exists():
        with Analyzer(db) as az:
            az.ingest(files)
    with Analyzer(db) as az:
        whole: list[float] = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            summary = az.summary()
            whole.append(time.perf_counter() - started)
    # A read-only connection of its own, as the dashboard's (the Analyzer closed).
    connection = duckdb.connect(str(db), read_only=True)
    cover: list[float] = []
    try:
        for _ in range(ROUNDS):
            started = time.perf_counter()
            coverage_of(connection)
            cover.append(time.perf_counter() - started)
    finally:
        connection.close()
    print(summary["spans"], summary["coverage"])
    print(
        f"summary() median {statistics.median(whole):.3f} s (min {min(whole):.3f}); "
        f"coverage statements median {statistics.median(cover):.3f} s (min {min(cover):.3f})"
    )


if __name__ == "__main__":
    main()
