"""``toolspan mcp proxy``: the command line of the proxy (registered by ``toolspan.cli``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..._errors import ConfigurationError

__all__ = ["register"]

EXIT_USAGE = 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp`` and its ``proxy`` sub-command."""
    mcp = subparsers.add_parser("mcp", help="MCP tools: the retry boundary as a proxy")
    commands = mcp.add_subparsers(dest="mcp_command", metavar="COMMAND", required=True)
    proxy = commands.add_parser(
        "proxy",
        help="run every tools/call of an MCP server through the retry boundary",
        description="Serve an MCP client (stdio by default) in front of an upstream server "
        "launched as COMMAND ARGS... (stdio) or reached at --upstream URL (streamable HTTP).",
    )
    proxy.add_argument("--config", metavar="FILE", help="the tools' declarations (TOML)")
    proxy.add_argument("--upstream", metavar="URL", help="a streamable HTTP upstream server")
    proxy.add_argument("--serve", choices=("stdio", "http"), default="stdio")
    proxy.add_argument("--host", default="127.0.0.1", help="with --serve http")
    proxy.add_argument("--port", type=int, default=8100, help="with --serve http")
    proxy.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="with --serve http: a Host accepted besides loopback names and --host (repeatable)",
    )
    proxy.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="with --serve http: an Origin accepted besides loopback ones (repeatable)",
    )
    proxy.add_argument(
        "--trace-file", metavar="PATH", help="append the spans as OTLP/JSON lines to PATH"
    )
    proxy.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS")
    proxy.set_defaults(handler=run_proxy)


def run_proxy(args: argparse.Namespace) -> int:
    """Check the arguments and the config, then serve until the client goes away."""
    command = server_command(args)
    from ._serve import serve

    try:
        return serve(**_settings(args, command))
    except ConfigurationError as exc:  # found before anything is served
        print(f"toolspan mcp proxy: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def server_command(args: argparse.Namespace) -> list[str]:
    """The server's command line: from the first argument that is not the proxy's
    (``--`` before it optional: config files of some clients cannot carry it)."""
    command: list[str] = args.command
    return command[1:] if command[:1] == ["--"] else command


def _settings(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    from ._config import load_config

    if bool(command) == bool(args.upstream):
        raise ConfigurationError("give either -- COMMAND ARGS... (stdio) or --upstream URL")
    return {
        "config": load_config(args.config),
        "command": command,
        "url": args.upstream,
        "serve_http": args.serve == "http",
        "host": args.host,
        "port": args.port,
        "allowed_hosts": _allowed_hosts(args.host, args.allow_host),
        "allowed_origins": args.allow_origin,
        "trace_file": args.trace_file,
    }


def _allowed_hosts(host: str, allowed: list[str]) -> list[str]:
    """The hosts allowed in ``Host``: the bound address too, unless it is a wildcard."""
    if host in ("0.0.0.0", "::", ""):  # noqa: S104 (recognising a wildcard, not binding)
        return allowed
    return [*allowed, f"[{host}]" if ":" in host else host]
