"""The ``toolspan`` command line: one entry point, one sub-command per part.

Each part registers its own sub-commands, so this module stays a thin router
and importing it pulls in neither DuckDB nor Streamlit until a sub-command
that needs them runs. A sub-command whose extra is not installed says which
one in one line and exits 2; ``--help`` and ``--version`` need no extra.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from typing import NamedTuple

from ._extras import install_hint

EXIT_MISSING_EXTRA = 2


class _Part(NamedTuple):
    """The module that registers some sub-commands, and what each needs installed."""

    module: str
    # sub-command -> (the extra that installs it, the modules that extra brings)
    needs: dict[str, tuple[str, tuple[str, ...]]]


_ANALYZER = ("analyzer", ("duckdb", "zstandard"))
_PARTS: tuple[_Part, ...] = (
    _Part(
        "toolspan.analyzer.cli",
        {
            "analyze": _ANALYZER,
            "sql": _ANALYZER,
            "clickhouse": ("clickhouse", ("duckdb", "clickhouse_connect", "chdb")),
        },
    ),
    _Part("toolspan.dashboard.cli", {"dashboard": ("dashboard", ("duckdb", "streamlit"))}),
    _Part(
        "toolspan.serve.cli",
        {"serve": ("serve", ("duckdb", "streamlit", "grpc", "uvicorn", "starlette"))},
    ),
    _Part("toolspan.tracer.integrations.mcp_proxy._cli", {"mcp": ("mcp", ("mcp",))}),
    # The core install runs it: the tracer, and httpx only if the checked tools use it.
    _Part("toolspan._check", {"check": ("", ())}),
    # Only a redis:// store needs the extra; RedisStore says so itself.
    _Part("toolspan.tracer._quarantine_cli", {"quarantine": ("redis", ())}),
)


def _missing_extra(command: str) -> str | None:
    """The extra ``command`` needs that is not installed, or None."""
    for part in _PARTS:
        if command in part.needs:
            extra, modules = part.needs[command]
            if any(importlib.util.find_spec(module) is None for module in modules):
                return extra
    return None


def _version() -> str:
    from ._version import __version__

    return __version__


def _build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolspan",
        description="Safe-to-retry, easy-to-see tool calls for LLM agents.",
    )
    parser.add_argument("--version", action="version", version=f"toolspan {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = next((arg for arg in argv if not arg.startswith("-")), None)
    if wanted is None and "--version" in argv and not {"-h", "--help"} & set(argv):
        return parser  # no part is needed to print the version (all of them took 1.7 s)
    for part in _PARTS:
        # Only import the part that owns the requested command (or all, for --help).
        if wanted is not None and wanted not in part.needs:
            continue
        try:
            module = importlib.import_module(part.module)
        except ModuleNotFoundError as exc:
            if (exc.name or "toolspan").startswith("toolspan"):
                raise  # a bug of ours, not a missing extra
            for command, (extra, _) in part.needs.items():
                # Listed in --help all the same, with the line that installs it.
                help_text = f"(needs {install_hint(extra)})"
                subparsers.add_parser(command, help=help_text, add_help=False)
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    wanted = next((arg for arg in args_list if not arg.startswith("-")), None)
    extra = _missing_extra(wanted) if wanted is not None else None
    if extra is not None and "--version" not in args_list:
        print(
            f"toolspan {wanted} needs the {extra!r} extra: {install_hint(extra)}",
            file=sys.stderr,
        )
        return EXIT_MISSING_EXTRA
    parser = _build_parser(args_list)
    args = parser.parse_args(args_list)
    result: int = args.handler(args)
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
