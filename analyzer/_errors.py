"""The analyzer's branch of toolspan's one exception tree (drawn in ``common/_errors.py``):
every failure callers see is an ``AnalyzerError``, itself a ``ToolspanError``."""

from __future__ import annotations

from .._errors import AnalyzerError, CorruptInputError, DatabaseError, InputError, QueryError

__all__ = ["AnalyzerError", "CorruptInputError", "DatabaseError", "InputError", "QueryError"]
