"""``toolspan quarantine list|lift``: what the fleet refuses, and giving it back."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

import orjson

from ._errors import ToolspanError
from ._quarantine import lift_quarantines, list_quarantines
from .store import open_store

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``quarantine`` sub-command."""
    parser = subparsers.add_parser(
        "quarantine",
        help="list or lift the quarantines in a shared store (see toolspan serve --enforce)",
        description=(
            "Quarantines are calls every executor sharing the store refuses with status "
            "quarantined, written by toolspan serve --enforce from live findings."
        ),
    )
    parser.add_argument(
        "action", choices=("list", "lift"), help="list them, or lift the ids given (or --all)"
    )
    parser.add_argument("ids", nargs="*", metavar="ID", help="with lift: the quarantines")
    parser.add_argument(
        "--store", required=True, metavar="URL", help="redis://host:6379/0 or a SQLite file"
    )
    parser.add_argument("--all", action="store_true", help="with lift: every quarantine")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "lift" and not (args.ids or args.all):
        print("toolspan quarantine: error: lift takes ids or --all", file=sys.stderr)
        return 2
    try:
        store = open_store(args.store)
        try:
            if args.action == "list":
                shown = list_quarantines(store)
            else:
                shown = lift_quarantines(store, None if args.all else set(args.ids))
        finally:
            store.close()
    except ToolspanError as exc:
        print(f"toolspan quarantine: error: {exc}", file=sys.stderr)
        return 1
    for quarantine in shown:
        if args.json:
            print(orjson.dumps(quarantine.to_json()).decode())
            continue
        until = datetime.fromtimestamp(quarantine.until, UTC).isoformat(timespec="seconds")
        done = "lifted" if args.action == "lift" else f"until {until}"
        print(
            f"{quarantine.id}  {quarantine.scope}  conversation={quarantine.conversation_id} "
            f"tool={quarantine.tool}  {done}  {quarantine.reason}"
        )
    if not shown:
        print("no quarantines" if args.action == "list" else "nothing lifted")
    return 0
