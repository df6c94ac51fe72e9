"""The SQL console's bounds, measured: per-query cost of running in a child
process, and what the two runaway queries of issue 10 cost the app.

Each query of the console runs in its own child process (``_sandbox_worker``);
the floor is the same query on the app's own locked connection in-process.

    .venv/bin/python bench/console_bench.py [--repeats 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from toolspan.dashboard import DashboardError, SandboxLimits, SqlSandbox, open_database

RUNAWAYS = (
    "SELECT repeat('x', 200000) FROM range(100000)",
    "SELECT len(list_sort(range(50000000)))",
)


def _resident_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolspan-console-") as scratch:
        path = Path(scratch) / "t.duckdb"
        with duckdb.connect(str(path)) as con:
            con.execute("CREATE TABLE t AS SELECT range AS i FROM range(1000)")
        limits = SandboxLimits()
        connection = open_database(path, limits)
        sandbox = SqlSandbox(connection, limits)
        query = "SELECT count(*), sum(i) FROM t"
        floor, child = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            connection.cursor().sql(query).fetchall()
            floor.append(time.perf_counter() - started)
            started = time.perf_counter()
            sandbox.run(query)
            child.append(time.perf_counter() - started)
        in_process, in_child = statistics.median(floor), statistics.median(child)
        print(
            f"median of {args.repeats}: in-process {in_process * 1e3:.1f} ms, "
            f"console (child process) {in_child * 1e3:.0f} ms ({in_child / in_process:.0f}x)"
        )
        for runaway in RUNAWAYS:
            before = _resident_mb()
            started = time.perf_counter()
            try:
                sandbox.run(runaway)
                outcome = "ran"
            except DashboardError as exc:
                outcome = f"{type(exc).__name__}"
            print(
                f"{runaway}: {outcome} after {time.perf_counter() - started:.2f} s, "
                f"app RSS +{_resident_mb() - before:.0f} MB"
            )


if __name__ == "__main__":
    main()
