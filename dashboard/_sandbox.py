"""The locked-down DuckDB connection the dashboard runs on, and the SQL console's runner.

DuckDB refuses a second connection to the same file with a different
configuration inside one process, so the whole app shares one database
instance, opened here with the sandbox's settings: read-only, no file or
network access, no extension loading, bounded memory and threads, and the
configuration locked so SQL cannot undo any of it. The console adds a
statement allowlist, a time limit and a row limit on top. No Streamlit here:
this module is unit-tested on its own.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ._errors import DashboardError, QueryFailed, QueryRefused, QueryTimeout

__all__ = ["SandboxLimits", "SandboxResult", "SqlSandbox", "open_database"]

# Statement types the console runs. SHOW, DESCRIBE, SUMMARIZE, FROM-first and
# WITH queries all parse as SELECT. Everything else (SET, CREATE TEMP, COPY,
# ATTACH, PRAGMA, CALL...) is refused before DuckDB sees it; the locked
# configuration below refuses it again if this list is ever wrong.
_ALLOWED_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of the app's DuckDB instance and of one console query."""

    time_limit_s: float = 10.0
    max_rows: int = 10_000
    memory_limit: str = "1GB"
    threads: int = 2
    max_temp_directory_size: str = "1GB"


@dataclass(frozen=True)
class SandboxResult:
    """At most ``max_rows`` rows of a console query; ``truncated`` when there were more."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_s: float


def _config(limits: SandboxLimits) -> dict[str, str | bool | int | float | list[str]]:
    # lock_configuration must come last in effect; DuckDB applies the config
    # dict before locking, so order in the dict does not matter here.
    return {
        "access_mode": "READ_ONLY",
        "enable_external_access": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
        "allow_persistent_secrets": False,
        "memory_limit": limits.memory_limit,
        "max_temp_directory_size": limits.max_temp_directory_size,
        "threads": limits.threads,
        "lock_configuration": True,
    }


def open_database(
    db_path: Path, limits: SandboxLimits = SandboxLimits()
) -> duckdb.DuckDBPyConnection:
    """Open an analyzer database read-only with the sandbox configuration."""
    if not db_path.is_file():
        raise DashboardError(f"no database at {db_path}: ingest traces first (toolspan analyze)")
    try:
        return duckdb.connect(str(db_path), read_only=True, config=_config(limits))
    except duckdb.Error as exc:
        raise DashboardError(f"cannot open {db_path} read-only: {_first_line(exc)}") from exc


class SqlSandbox:
    """Runs one user statement at a time on a cursor of the locked connection."""

    def __init__(
        self, connection: duckdb.DuckDBPyConnection, limits: SandboxLimits = SandboxLimits()
    ) -> None:
        self._connection = connection
        self.limits = limits

    def run(self, sql: str) -> SandboxResult:
        """Run ``sql`` and return its first rows, or raise a :class:`DashboardError`."""
        statement = _single_read_statement(sql)
        started = time.monotonic()
        cursor = self._connection.cursor()
        # A fresh cursor per run: interrupting it cannot touch another session's query.
        timer = threading.Timer(self.limits.time_limit_s, cursor.interrupt)
        timer.daemon = True
        timer.start()
        try:
            columns, rows = _fetch(cursor, statement, self.limits.max_rows)
        except duckdb.InterruptException as exc:
            raise QueryTimeout(
                f"Stopped after {self.limits.time_limit_s:g} s: the query ran past the "
                "console's time limit. Aggregate or filter more, or add a LIMIT."
            ) from exc
        except duckdb.Error as exc:
            raise _refusal_or_failure(exc) from exc
        finally:
            timer.cancel()
            cursor.close()
        truncated = len(rows) > self.limits.max_rows
        return SandboxResult(
            columns=columns,
            rows=rows[: self.limits.max_rows],
            truncated=truncated,
            elapsed_s=time.monotonic() - started,
        )


def _single_read_statement(sql: str) -> str:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryFailed(_first_line(exc)) from exc
    if not statements:
        raise QueryRefused("Enter a query: the console got no SQL statement.")
    if len(statements) > 1:
        raise QueryRefused(f"One statement at a time: got {len(statements)}.")
    statement = statements[0]
    if statement.type not in _ALLOWED_STATEMENTS:
        kind = statement.type.name
        raise QueryRefused(
            f"Refused: the SQL console only reads (SELECT, WITH, FROM, SHOW, DESCRIBE, "
            f"SUMMARIZE, EXPLAIN), not {kind}."
        )
    return sql


def _fetch(
    cursor: duckdb.DuckDBPyConnection, sql: str, max_rows: int
) -> tuple[list[str], list[tuple[Any, ...]]]:
    relation = cursor.sql(sql)
    if relation is None:  # pragma: no cover - only non-query statements, refused above
        return [], []
    # LIMIT on the relation is pushed into the plan: DuckDB stops producing
    # rows after max_rows + 1 instead of materialising the whole result.
    limited = relation.limit(max_rows + 1)
    return list(limited.columns), limited.fetchall()


# DuckDB messages that mean "the sandbox said no" -> the message the user reads.
_REFUSALS: tuple[tuple[str, str], ...] = (
    (
        "disabled by configuration",
        "Refused: the SQL console cannot read or write files, attach databases, "
        "reach the network or load extensions.",
    ),
    (
        "configuration has been locked",
        "Refused: settings are locked in the SQL console.",
    ),
    (
        "read-only mode",
        "Refused: the database is read-only in the SQL console.",
    ),
)


def _refusal_or_failure(exc: duckdb.Error) -> DashboardError:
    message = str(exc)
    for needle, explanation in _REFUSALS:
        if needle in message:
            return QueryRefused(f"{explanation} (DuckDB: {_first_line(exc)})")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return QueryFailed(f"The query ran out of the console's memory limit: {_first_line(exc)}")
    return QueryFailed(message.strip())


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
