"""The ``toolspan`` command line: one entry point, one sub-command per part.

Each part registers its own sub-commands, so this module stays a thin router
and importing it pulls in neither DuckDB nor Streamlit until a sub-command
that needs them runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# module path -> the sub-commands it registers (imported lazily).
_PARTS: dict[str, tuple[str, ...]] = {
    "toolspan.analyzer.cli": ("analyze", "sql", "clickhouse"),
    "toolspan.dashboard.cli": ("dashboard",),
    "toolspan.serve.cli": ("serve",),
    "toolspan.tracer.integrations.mcp_proxy._cli": ("mcp",),
}


def _build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolspan",
        description="Safe-to-retry, easy-to-see tool calls for LLM agents.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = next((arg for arg in argv if not arg.startswith("-")), None)
    for module_name, commands in _PARTS.items():
        # Only import the part that owns the requested command (or all, for --help).
        if wanted is None or wanted in commands:
            module = importlib.import_module(module_name)
            module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser(args_list)
    args = parser.parse_args(args_list)
    result: int = args.handler(args)
    return result


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
