"""A guarded ClickHouse session holding one analysis' tables, for the dashboard.

The dashboard reads the analysis the way it reads a DuckDB database: the
tables ``tool_calls``, ``attempts``, ``conversations`` and ``findings`` (here
temporary tables of one client session, built once from the collector's
table), and the spans in range (a subquery over the collector's table, never
copied: it is the big one). Once they are built the session is locked with the
server's own guards, set session-wide, ``readonly = 1`` last: from then on
nothing in it may change a setting, reach a file, URL or other server, or write
a table (temporary tables excepted: ClickHouse lets a read-only session write
its own temporary tables, so the dashboard's console refuses every statement
but a read before it gets here).

chDB runs one engine per process: the process that owns the session (the
Streamlit server) runs every query through it, one at a time (``_lock``): a
ClickHouse session also refuses concurrent queries.

Separate from ``_clickhouse.py`` (the analyzer's own path) so that the two
evolve apart; it uses that module's session and rendering.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._clickhouse import (
    _SETTINGS,
    ClickHouseAnalyzer,
    ClickHouseSource,
    _identifier,
    _message,
    statement,
)
from ._errors import QueryError
from ._model import DEFAULT_MIN_REPEATS, QueryResult

__all__ = ["ClickHouseSession", "SessionLimits"]

# The analysis' tables besides the analyzer's stages, and the statement of each.
_TABLES = (
    ("attempts", "clickhouse_derive", "attempts"),
    ("conversations", "clickhouse_derive", "conversations"),
    ("findings", "clickhouse_findings", "findings"),
)


@dataclass(frozen=True)
class SessionLimits:
    """The guards set on the whole session once its tables are built.

    ``max_rows`` / ``max_result_bytes`` stop a result (``result_overflow_mode
    = 'break'``: the rows so far, at block granularity; the caller cuts to
    ``max_rows``); ``max_memory_bytes`` is ``max_memory_usage`` (a block too
    big to hold fails there); ``timeout_s`` is ``max_execution_time``.
    """

    timeout_s: int = 10
    max_memory_bytes: int = 1_000_000_000
    max_rows: int = 10_000
    max_result_bytes: int = 32 * 1024 * 1024

    def settings(self) -> dict[str, Any]:
        # readonly last: every other setting is set while settings may change.
        return {
            **_SETTINGS,
            "max_execution_time": self.timeout_s,
            "max_memory_usage": self.max_memory_bytes,
            "max_result_rows": self.max_rows + 1,
            "max_result_bytes": self.max_result_bytes,
            "result_overflow_mode": "break",
            "readonly": 1,
        }


class ClickHouseSession(ClickHouseAnalyzer):
    """The analysis of ``source``'s collector table, in one guarded session."""

    def __init__(
        self,
        source: str | ClickHouseSource,
        *,
        table: str = "otel_traces",
        since: datetime | None = None,
        until: datetime | None = None,
        write_tools: Sequence[str] = (),
        limits: SessionLimits | None = None,
        extra_tables: Mapping[str, str] | None = None,
    ) -> None:
        """``extra_tables``: more temporary tables a caller reads, by name, each
        the result of its SQL (``$source`` and ``$range`` filled in)."""
        self._lock = threading.Lock()
        super().__init__(source, table=table, since=since, until=until, write_tools=write_tools)
        self.limits = limits or SessionLimits()
        self._extra_tables = dict(extra_tables or {})
        try:
            self._build()
            self._guard()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        self._materialize()
        bodies = {
            name: self._render(
                statement(stem, statement_name), min_repeats=str(DEFAULT_MIN_REPEATS)
            )
            for name, stem, statement_name in _TABLES
        }
        bodies.update({name: self._render(sql) for name, sql in self._extra_tables.items()})
        for name, body in bodies.items():  # once, in a new session: nothing to drop
            self._command(
                f"CREATE TEMPORARY TABLE {_identifier(name)} ENGINE = Memory AS {body}",
                self._parameters(),
            )

    def close(self) -> None:
        """Close the session once the read running on it (if any) is done."""
        with self._lock:
            super().close()

    def _guard(self) -> None:
        for key, value in self.limits.settings().items():
            literal = f"'{value}'" if isinstance(value, str) else str(int(value))
            self._client.command(f"SET {key} = {literal}")

    def render(self, sql: str) -> str:
        """``sql`` with ``$source`` (the collector's table) and ``$range`` (the
        time range, as ``{since:...}`` / ``{until:...}`` parameters) filled in."""
        return self._render(sql)

    def parameters(self) -> dict[str, Any]:
        """The parameters every query of this session takes (time range, write tools)."""
        return self._parameters()

    def read(self, sql: str, params: Mapping[str, Any] | None = None) -> QueryResult:
        """Run one read in the session, under its guards; errors are masked.

        ``params`` bind ``{name:Type}`` placeholders; without any the text is
        sent as it is (a ``%`` in it stays a ``%``)."""
        with self._lock:
            try:
                result = self._client.query(sql, parameters=dict(params) if params else None)
            except Exception as exc:
                raise QueryError(_message(exc, self.source)) from None
        rows = [tuple(row) for row in result.result_rows]
        return QueryResult(tuple(result.column_names), rows)

    def masked(self, exc: BaseException) -> str:
        """An error's text with the source's credentials masked."""
        return _message(exc, self.source)
