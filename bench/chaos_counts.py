"""The chaos scenario of ``tests/chaos`` at a larger scale, with the store failing too.

One row per (store, persistence, service, loss detection): SQLite, and a real
``redis-server`` (started here) with no persistence, AOF ``everysec`` and AOF
``always``; the legacy service (no key dedup; the tool reads back) and the
key-honouring one (no read-back); for Redis, with toolspan's loss detection on and
off. Faults (``--faults all``, the default, or a comma list of ``kills``,
``restarts``, ``outages``, or ``none``): a worker SIGKILLed about every second right
after its charge committed (each replaced); the Redis server SIGKILLed and
restarted (under AOF ``everysec`` a power cut: the append-only files of half a second
earlier put back, so the last writes are lost); the store unreachable for two seconds
(Redis paused, SQLite locked). Always, whatever ``--faults`` says: the service commits
about 7% of charge requests 0.1-0.5 s after the client timed out (late commits).

    python bench/chaos_counts.py --actions 10000 --workers 8 --faults all [--json rows.json]

``promised`` is what docs/durability.md promises for the row: zero duplicates and zero
lost actions. Rows where it is false show what the configuration really costs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

# The scenario lives with the tests (``tests.chaos``): run from a clone, import from its root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.chaos.faults import Faults, run_with_faults
from tests.chaos.scenario import Scenario
from tests.chaos.worker import StoreLocation
from tests.redis_server import RedisServer
from toolspan.tracer.store import SQLiteStore

COLUMNS = [
    ("store", "store"),
    ("persistence", "persistence"),
    ("service", "service"),
    ("loss_detection", "loss detection"),
    ("actions", "actions"),
    ("kills", "kills"),
    ("restarts", "restarts / power cuts"),
    ("outages", "outages"),
    ("late_commits", "late commits"),
    ("side_effects", "side effects"),
    ("duplicates", "duplicates"),
    ("lost", "lost"),
    ("unfinished", "unfinished at the deadline"),
    ("refused_store_unavailable", "refused (store unavailable)"),
    ("store_lost_seen", "calls that saw the loss"),
    ("store_new_seen", "calls new to the store"),
    ("reconciled", "reconciled by read-back"),
    ("promised", "promised 0/0"),
    ("seconds", "seconds"),
]


def configurations() -> list[tuple[str, str, bool, bool]]:
    """(store, persistence, honours_keys, loss detection), in table order."""
    rows = [("sqlite", "WAL, synchronous=FULL", keys, True) for keys in (False, True)]
    for persistence in ("always", "everysec", "none"):
        for keys in (False, True):
            for detect in (True, False):
                rows.append(("redis", persistence, keys, detect))
    return rows


def promised(store: str, persistence: str, honours_keys: bool, detect: bool) -> bool:
    """What docs/durability.md promises: zero duplicates and zero lost."""
    if store == "sqlite" or persistence == "always":
        return True
    # everysec loses the last second (a power cut), none loses everything: only loss
    # detection (or a service that dedupes on the key) keeps a forgotten key from running
    # twice.
    return detect or honours_keys


def parse_faults(text: str, detect: bool, max_kills: int = 20, kill_every_s: float = 1.0) -> Faults:
    names = {"kills", "restarts", "outages"} if text == "all" else set(text.split(",")) - {"none"}
    unknown = names - {"kills", "restarts", "outages"}
    if unknown:
        raise SystemExit(f"unknown faults: {', '.join(sorted(unknown))}")
    return Faults(
        kill_every_s=kill_every_s if "kills" in names else None,
        max_kills=max_kills,
        restarts=1 if "restarts" in names else 0,
        outages=1 if "outages" in names else 0,
        outage_s=2.0,
        detect_store_loss=detect,
    )


def run_row(
    store: str, persistence: str, honours_keys: bool, detect: bool, args: Any, workdir: Path
) -> dict[str, Any]:
    scenario = Scenario(
        honours_keys=honours_keys,
        actions=args.actions,
        workers=args.workers,
        replans_per_worker=max(15, args.actions // args.workers // 4),
        deadline_s=args.deadline_s,
    )
    faults = parse_faults(args.faults, detect, args.max_kills, args.kill_every)
    where = workdir / f"{store}-{persistence}-{honours_keys}-{detect}"
    if store == "sqlite":
        where.mkdir(parents=True)
        SQLiteStore(where / "store.db").close()  # the schema, before the race
        location = StoreLocation("sqlite", str(where / "store.db"))
        run = run_with_faults(scenario, faults, location, where / "run")
    else:
        with RedisServer(persistence=persistence) as server:  # type: ignore[arg-type]
            location = StoreLocation("redis", server.url, prefix="chaos:")
            run = run_with_faults(scenario, faults, location, where / "run", redis=server)
    counts = run.counts()
    counts.update(
        persistence=persistence,
        loss_detection="on" if detect else "off",
        promised=promised(store, persistence, honours_keys, detect),
    )
    return counts


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(str(row[key]) for key, _ in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--faults", default="all")
    parser.add_argument(
        "--only",
        help="a comma list of stores (sqlite, redis) or store:persistence (redis:none) to run",
    )
    parser.add_argument(
        "--max-kills",
        type=int,
        default=20,
        help="kills per run at most (a replacement "
        "re-runs its whole plan, so without a cap a long run may never end)",
    )
    parser.add_argument(
        "--kill-every", type=float, default=1.0, help="seconds between kills (about)"
    )
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=1800.0,
        help="each worker stops here with its plan unfinished (a loaded machine needs more)",
    )
    parser.add_argument(
        "--rows",
        help="a comma list of row numbers (1-based, in table order, all 14 rows counted) to run",
    )
    parser.add_argument(
        "--promised-only",
        action="store_true",
        help="skip the rows docs/durability.md promises nothing for (they break by design)",
    )
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else {"sqlite", "redis"}
    rows = []
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        chosen = {int(n) for n in args.rows.split(",")} if args.rows else None
        for number, config in enumerate(configurations(), start=1):
            if not {config[0], f"{config[0]}:{config[1]}"} & wanted:
                continue
            if chosen is not None and number not in chosen:
                continue
            if args.promised_only and not promised(*config):
                continue
            rows.append(run_row(*config, args, Path(tmp)))
            row = rows[-1]
            print(f"done: {markdown([row]).splitlines()[-1]}", file=sys.stderr, flush=True)
            if row["promised"] and row["duplicates"]:
                print(f"BROKEN PROMISE: {row}", file=sys.stderr)
            elif row["promised"] and (row["lost"] or row["unfinished"]):
                # Not charged because the workers ran out of time, not because a key was
                # lost: run again with a longer --deadline-s before calling it broken.
                print(f"INCOMPLETE (deadline hit): {row}", file=sys.stderr)
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    if any(r["promised"] and (r["duplicates"] or r["lost"]) for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
