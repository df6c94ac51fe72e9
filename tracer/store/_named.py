"""Load named statements (SQL queries, Lua scripts) from a file next to this module.

A file holds several statements, each introduced by a ``-- name: <name>`` line (a
comment in both SQL and Lua), so the statements stay in real .sql/.lua files.
"""

from __future__ import annotations

import re
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def load_named(filename: str) -> dict[str, str]:
    text = resources.files(__package__).joinpath(filename).read_text(encoding="utf-8")
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    named = {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}
    if not named:
        raise RuntimeError(f"{filename} holds no '-- name:' sections")
    return named
