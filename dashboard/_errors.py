"""The dashboard's exception tree: one base, three ways a query can end badly."""

from __future__ import annotations

__all__ = ["DashboardError", "QueryFailed", "QueryRefused", "QueryTimeout"]


class DashboardError(Exception):
    """Base of every error the dashboard raises; its message is shown to the user as is."""


class QueryRefused(DashboardError):
    """The SQL console will not run this statement (a write, a file, a setting...)."""


class QueryTimeout(DashboardError):
    """The query ran past the time limit and was interrupted."""


class QueryFailed(DashboardError):
    """DuckDB rejected the query (syntax, unknown table, out of memory...)."""
