"""The one loader of named statements (SQL queries, Lua scripts) for every part.

Statements live in real ``.sql`` / ``.lua`` files next to the code that runs
them, never inline. A file holds one or more statements, each introduced by a
``-- name: NAME`` line (a comment in SQL and in Lua), as aiosql does::

    -- What the file is for (comments before the first name belong to the file).

    -- name: count_spans
    -- Comments after the name line stay in the statement.
    SELECT count(*) FROM span_rows;

One rule everywhere: a statement is its text up to the next name line, without
the surrounding whitespace and trailing ``;`` (so it can be run alone or
wrapped, e.g. in a macro). Names are unique within a file; anything but
comments before the first name, an empty statement or a file without names is
a packaging mistake and fails on first load, naming the file.

This module is plumbing shared by the tracer, analyzer and dashboard: it
imports no database driver, so the tracer core stays free of DuckDB.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from importlib import resources

__all__ = ["Statements", "load_statements", "parse_statements"]

_NAME_LINE = re.compile(r"^-- name: *(\S*) *$", re.MULTILINE)
_VALID_NAME = re.compile(r"\w+")


class Statements(Mapping[str, str]):
    """The named statements of one file, by name, in file order (read-only)."""

    __slots__ = ("_by_name", "source")

    def __init__(self, source: str, by_name: Mapping[str, str]) -> None:
        self.source = source
        self._by_name = dict(by_name)

    def __getitem__(self, name: str) -> str:
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(self._by_name)
            raise KeyError(f"{self.source} has no statement {name!r} (it has: {known})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Statements({self.source!r}, names={list(self._by_name)!r})"


@functools.cache
def load_statements(package: str, filename: str) -> Statements:
    """The statements of ``filename`` (``/``-separated, relative to ``package``'s folder).

    Callers pass their own ``__package__``: ``load_statements(__package__,
    "sql/derive.sql")``. Loaded once per file (cached): the files are package
    data and do not change while the process runs.
    """
    resource = resources.files(package)
    for part in filename.split("/"):
        resource = resource.joinpath(part)
    source = f"{package.replace('.', '/')}/{filename}"
    return Statements(source, parse_statements(resource.read_text(encoding="utf-8"), source))


def parse_statements(text: str, source: str = "<text>") -> dict[str, str]:
    """The named statements of ``text`` (the file format above); ``source`` names it in errors."""
    parts = _NAME_LINE.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    preamble, names, bodies = parts[0], parts[1::2], parts[2::2]
    if not names:
        raise ValueError(f"{source} holds no '-- name:' sections")
    stray = [line for line in preamble.splitlines() if line.strip() and not _is_comment(line)]
    if stray:
        raise ValueError(f"{source}: text before the first '-- name:' line: {stray[0]!r}")
    statements: dict[str, str] = {}
    for name, body in zip(names, bodies, strict=True):
        if not _VALID_NAME.fullmatch(name):
            raise ValueError(f"{source}: {name!r} is not a statement name (letters, digits, _)")
        if name in statements:
            raise ValueError(f"{source}: two statements named {name!r}")
        statement = body.strip().rstrip(";").rstrip()
        if all(_is_comment(line) or not line.strip() for line in statement.splitlines()):
            raise ValueError(f"{source}: statement {name!r} is empty")
        statements[name] = statement
    return statements


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("--")
