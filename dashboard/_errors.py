"""The dashboard's branch of toolspan's one exception tree (drawn in ``common/_errors.py``):
one base, ``DashboardError`` (a ``ToolspanError``), and the ways a query can end badly."""

from __future__ import annotations

from .._errors import (
    DashboardError,
    QuarantineStoreError,
    QueryFailed,
    QueryMemoryExceeded,
    QueryRefused,
    QueryTimeout,
    ResultTooLarge,
)

__all__ = [
    "DashboardError",
    "QuarantineStoreError",
    "QueryFailed",
    "QueryMemoryExceeded",
    "QueryRefused",
    "QueryTimeout",
    "ResultTooLarge",
]
