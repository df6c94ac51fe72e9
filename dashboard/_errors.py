"""The dashboard's branch of toolspan's one exception tree (drawn in ``toolspan/_errors.py``):
one base, ``DashboardError`` (a ``ToolspanError``), three ways a query can end badly."""

from __future__ import annotations

from .._errors import DashboardError, QueryFailed, QueryRefused, QueryTimeout

__all__ = ["DashboardError", "QueryFailed", "QueryRefused", "QueryTimeout"]
