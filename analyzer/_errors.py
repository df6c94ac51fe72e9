"""The analyzer's exception tree: every failure callers see is an ``AnalyzerError``."""

from __future__ import annotations


class AnalyzerError(Exception):
    """Base class of every error the analyzer raises."""


class InputError(AnalyzerError):
    """A path that does not exist, or an input that holds no trace files."""


class CorruptInputError(AnalyzerError):
    """Corrupt lines were found while ingesting with ``strict=True``."""


class QueryError(AnalyzerError):
    """A SQL query failed (syntax, unknown column, type error, ...)."""


class DatabaseError(AnalyzerError):
    """The DuckDB database could not be opened or written."""
