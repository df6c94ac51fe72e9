"""The chaos scenario of ``tests/chaos`` at a larger scale: the counts table for the README.

Runs every (store, service) combination once: SQLite and a real
``redis-server`` (started here, as in the tests), against the legacy service
(no key dedup; the tool reads back) and the key-honouring one (no read-back).
Each run SIGKILLs the worker that committed the first shared charge.

    .venv/bin/python bench/chaos_counts.py [--actions 1000] [--workers 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

# The scenario lives with the tests (``tests.chaos``): run from a clone, import from its root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.scenario import Scenario, run_scenario
from tests.chaos.worker import StoreLocation
from tests.redis_server import RedisServer
from toolspan.tracer.store import SQLiteStore

COLUMNS = [
    ("store", "store"),
    ("service", "service"),
    ("processes", "processes"),
    ("actions", "actions"),
    ("tool_calls", "tool calls"),
    ("executions", "executions attempted"),
    ("committed_then_failed", "committed, then failed"),
    ("side_effects", "side effects committed"),
    ("duplicates", "duplicates"),
    ("lost", "lost"),
    ("replays", "replays"),
    ("conflicts_refused", "conflicts refused"),
    ("takeovers", "takeovers"),
    ("reconciled", "reconciled"),
    ("read_backs", "read-backs"),
    ("seconds", "seconds"),
]


def run_all(actions: int, workers: int, redis_url: str, workdir: Path) -> list[dict[str, Any]]:
    rows = []
    for backend in ("sqlite", "redis"):
        for honours_keys in (False, True):
            scenario = Scenario(
                honours_keys=honours_keys,
                actions=actions,
                workers=workers,
                replans_per_worker=max(15, actions // workers // 4),
                deadline_s=600.0,
            )
            where = workdir / f"{backend}-{honours_keys}"
            where.mkdir()
            if backend == "sqlite":
                SQLiteStore(where / "store.db").close()
                store = StoreLocation("sqlite", str(where / "store.db"))
            else:
                store = StoreLocation("redis", redis_url, prefix=f"chaos-{uuid.uuid4().hex}:")
            started = time.perf_counter()
            run = run_scenario(scenario, store, where / "run")
            counts = run.counts()
            counts["seconds"] = round(time.perf_counter() - started, 1)
            unfinished = sum(report["unfinished"] for report in run.reports)
            if unfinished or counts["duplicates"] or counts["lost"]:
                raise SystemExit(f"chaos run failed ({unfinished} steps unfinished): {counts}")
            rows.append(counts)
            print(f"done: {backend}, {counts['service']}", file=sys.stderr)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(str(row[key]) for key, _ in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    with RedisServer() as server, tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        rows = run_all(args.actions, args.workers, server.url, Path(tmp))
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
