"""``toolspan serve``: receive OTLP, analyse continuously, alert, serve the dashboard."""

from __future__ import annotations

import argparse
import gc
import signal
import sys
import threading
from pathlib import Path

from .._errors import ServeError

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``serve`` sub-command."""
    parser = subparsers.add_parser(
        "serve",
        help="receive OTLP traces, analyse them as they arrive, serve the live dashboard",
        description=(
            "An OTLP receiver (gRPC and HTTP) that spools what it accepts to DIR, keeps a "
            "DuckDB database current from it, answers a small JSON API, posts new findings "
            "to a webhook and serves the dashboard, live. Loopback only unless --host and "
            "--token say otherwise. Ctrl-C stops it. See docs/serve.md."
        ),
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("toolspan-data"),
        help="the spool (default ./toolspan-data)",
    )
    parser.add_argument(
        "--db", type=Path, metavar="FILE", help="the DuckDB database (default DIR/toolspan.duckdb)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    parser.add_argument("--http-port", type=int, default=4318, metavar="N", help="default 4318")
    parser.add_argument("--grpc-port", type=int, default=4317, metavar="N", help="default 4317")
    parser.add_argument(
        "--port",
        type=int,
        default=8501,
        metavar="N",
        help="the dashboard's (default 8501; 0: none)",
    )
    parser.add_argument(
        "--token", metavar="T", help="bearer token required on both protocols and the API"
    )
    parser.add_argument(
        "--follow",
        type=Path,
        metavar="DIR",
        help="also read what a collector's file exporter writes",
    )
    parser.add_argument("--alert-webhook", metavar="URL", help="post each new finding here")
    parser.add_argument(
        "--alert-on",
        metavar="KINDS",
        help="comma-separated finding kinds to alert on (default all)",
    )
    parser.add_argument(
        "--write-tools", metavar="NAMES", help="comma-separated tool names or globs that write"
    )
    parser.add_argument(
        "--clickhouse",
        metavar="SOURCE",
        help="also write the spans into ClickHouse as the collector's exporter does "
        "(clickhouse://user@host:8123/database, clickhouses://..., chdb:PATH)",
    )
    parser.add_argument(
        "--clickhouse-table",
        default="otel_traces",
        metavar="NAME",
        help="with --clickhouse: the table, [database.]name (default otel_traces; "
        "created if missing)",
    )
    parser.add_argument(
        "--enforce",
        metavar="STORE",
        help="quarantine what live findings name, in the store the executors share "
        "(redis://host:6379/0 or a SQLite file): they refuse those calls with quarantined",
    )
    parser.add_argument(
        "--enforce-policy",
        type=Path,
        metavar="FILE",
        help="with --enforce: a TOML file, one table per finding kind with scope "
        "(conversation_tool, conversation, tool) and ttl_s "
        "(default: loop and duplicate_write stop the tool in the conversation for 3600 s)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM."""
    from ..analyzer import FINDING_KINDS
    from ._server import Server, Settings, is_loopback

    kinds = tuple(_split(args.alert_on))
    unknown = set(kinds) - set(FINDING_KINDS)
    if unknown:
        return _error(f"unknown --alert-on kind: {', '.join(sorted(unknown))}")
    settings = Settings(
        directory=args.dir,
        db=args.db,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        dashboard_port=args.port,
        token=args.token,
        follow=args.follow,
        alert_webhook=args.alert_webhook,
        alert_on=kinds,
        write_tools=tuple(_split(args.write_tools)),
        clickhouse=args.clickhouse,
        clickhouse_table=args.clickhouse_table,
        enforce=args.enforce,
        enforce_policy=args.enforce_policy,
    )
    stop = threading.Event()
    _on_signals(stop)
    try:
        server = Server(settings).start()
    except (ServeError, OSError) as exc:
        return _error(str(exc))
    # What the started server holds (modules, its parts) lives as long as the
    # process: moved out of the garbage collector's way, so that the full
    # collections the parsing of every request triggers scan only what is
    # new (with --clickhouse the writer spent most of its time in them).
    gc.collect()
    gc.freeze()
    try:
        print(f"toolspan serve: running (Ctrl-C to stop)\n{server.describe()}", flush=True)
        if not is_loopback(settings.host):
            print(
                f"toolspan serve: warning: listening on {settings.host}, beyond this machine; "
                "every request must carry the token",
                flush=True,
            )
        while not stop.wait(0.5):
            pass
    finally:
        print("toolspan serve: stopping", flush=True)
        server.stop()
    return 0


def _on_signals(stop: threading.Event) -> None:
    if threading.current_thread() is not threading.main_thread():
        return

    def handle(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _split(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _error(message: str) -> int:
    print(f"toolspan serve: error: {message}", file=sys.stderr)
    return 2
