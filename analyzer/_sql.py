"""Loads the named SQL statements kept in this package's ``sql/*.sql`` files.

A file holds one or more statements, each introduced by a ``-- name: NAME``
line; a file without such lines is a single statement named after the file.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME_LINE = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def statements(file_stem: str) -> dict[str, str]:
    """The statements of ``sql/<file_stem>.sql`` by name, in file order."""
    text = resources.files(__package__).joinpath("sql", f"{file_stem}.sql").read_text("utf-8")
    parts = _NAME_LINE.split(text)
    if len(parts) == 1:
        return {file_stem: text.strip()}
    # parts = [preamble, name1, body1, name2, body2, ...]
    names, bodies = parts[1::2], parts[2::2]
    return {name: body.strip().rstrip(";") for name, body in zip(names, bodies, strict=True)}


def statement(file_stem: str, name: str) -> str:
    """One named statement of ``sql/<file_stem>.sql``."""
    return statements(file_stem)[name]
