"""Named SQL queries of the dashboard pages, run on cursors of the locked connection.

Every page query is the statement ``NAME`` of ``sql/NAME.sql`` (one query per
file, loaded by the shared loader, ``toolspan._sql``), reads the analyzer's views
through the filter macros of ``sql/macros.sql``, aggregates or pages in DuckDB,
and returns a small pandas frame. No Streamlit here, so it is testable alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pandas as pd

from .._sql import load_statements
from ..analyzer._analyzer import coverage_of
from ._clickhouse import ClickHouseDatabase
from ._errors import DashboardError

__all__ = ["Filters", "bucket_for", "coverage", "load_sql", "run_query", "window_start"]

# Time-bucket widths for the over-time chart, smallest first.
_BUCKETS = tuple(
    timedelta(seconds=s)
    for s in (1, 5, 15, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400)
)
_MAX_BUCKETS = 120


@dataclass(frozen=True)
class Filters:
    """The sidebar filters every page applies (``None`` / empty means all)."""

    start: datetime | None = None
    end: datetime | None = None
    conversation: str | None = None
    tools: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()

    def params(self) -> dict[str, Any]:
        """The named parameters the filter macros take."""
        return {
            "t0": self.start,
            "t1": self.end,
            "conv": self.conversation or None,
            "tools": list(self.tools),
            "statuses": list(self.statuses),
        }


def bucket_for(start: datetime, end: datetime) -> timedelta:
    """The smallest bucket width that draws ``start..end`` in at most 120 bars."""
    span = max(end - start, timedelta(seconds=1))
    return next((b for b in _BUCKETS if span / b <= _MAX_BUCKETS), _BUCKETS[-1])


def window_start(minutes: int, now: datetime | None = None) -> datetime:
    """Where "the last ``minutes`` minutes" start: naive UTC to the second (as stored)."""
    now = datetime.now(UTC) if now is None else now
    return (now - timedelta(minutes=minutes)).replace(tzinfo=None, microsecond=0)


def load_sql(name: str) -> str:
    """The page query ``name``: the statement ``name`` of ``sql/<name>.sql``."""
    return load_statements(__package__, f"sql/{name}.sql")[name]


def run_query(
    connection: duckdb.DuckDBPyConnection | ClickHouseDatabase,
    name: str,
    params: Mapping[str, Any],
) -> pd.DataFrame:
    """Run ``sql/<name>.sql`` with ``params`` on a fresh cursor and return the rows
    (on a ClickHouse source, ``sql/clickhouse_<name>.sql`` in its session)."""
    if isinstance(connection, ClickHouseDatabase):
        return connection.run_query(name, params)
    cursor = connection.cursor()
    try:
        for macro in load_statements(__package__, "sql/macros.sql").values():
            cursor.execute(macro)
        sql = load_sql(name)
        # DuckDB rejects named parameters the statement does not use.
        used = {key: value for key, value in params.items() if f"${key}" in sql}
        return cursor.execute(sql, _typed(used)).df()
    except duckdb.CatalogException as exc:
        raise DashboardError(
            "This database has no toolspan views (spans, tool_calls, attempts, findings): "
            f"ingest traces into it with `toolspan analyze PATH --db FILE`. ({_first_line(exc)})"
        ) from exc
    except duckdb.Error as exc:
        raise DashboardError(f"Query {name} failed: {_first_line(exc)}") from exc
    finally:
        cursor.close()


def coverage(connection: duckdb.DuckDBPyConnection | ClickHouseDatabase) -> dict[str, Any]:
    """The summary's coverage (docs/analyzer.md#coverage), by the analyzer's own
    statements: what was read, and what was recognised in it."""
    if isinstance(connection, ClickHouseDatabase):
        return connection.coverage()
    try:
        return coverage_of(connection)
    except duckdb.Error as exc:
        raise DashboardError(f"Query coverage failed: {_first_line(exc)}") from exc


def _typed(params: Mapping[str, Any]) -> dict[str, Any]:
    # An empty Python list binds as INTEGER[]; list filters are lists of names.
    return {
        key: duckdb.Value(value, duckdb.list_type(duckdb.sqltype("VARCHAR")))
        if isinstance(value, list)
        else value
        for key, value in params.items()
    }


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0]
