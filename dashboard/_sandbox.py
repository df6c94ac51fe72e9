"""The locked-down DuckDB connection the dashboard runs on, and the SQL console's runner.

DuckDB refuses a second connection to the same file with a different
configuration inside one process, so the whole app shares one database
instance, opened here with the sandbox's settings: read-only, no file or
network access, no extension loading, bounded memory and threads, and the
configuration locked so SQL cannot undo any of it.

A console query runs in a child process (``_sandbox_worker``) on its own
connection with the same settings: DuckDB's ``memory_limit`` covers only its
buffer manager (a huge list or string is outside it), so the child's resident
memory is watched and the child killed past ``max_process_mb``, and past the
time limit; the app itself never holds more than ``max_result_bytes`` of a
result. Before any of that, every statement is classified by the parser's
statement type (``_STATEMENT_KINDS``: unknown means refused), and ``EXPLAIN``
is judged by the statement it explains (``EXPLAIN ANALYZE`` runs it). No
Streamlit here: this module is unit-tested on its own.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import duckdb

from ._errors import (
    DashboardError,
    QueryFailed,
    QueryMemoryExceeded,
    QueryRefused,
    QueryTimeout,
    ResultTooLarge,
)
from ._units import human_size

__all__ = ["SandboxLimits", "SandboxResult", "SqlSandbox", "open_database"]

# Every statement type the parser returns, and whether the console runs it.
# SHOW, DESCRIBE, SUMMARIZE, PIVOT/UNPIVOT with an IN list, FROM-first, VALUES
# and WITH queries all parse as SELECT; EXPLAIN is judged by what it explains.
# A type missing here (a newer DuckDB, or one the Python enum lacks, such as
# UPDATE EXTENSIONS) is refused; the locked configuration below refuses the
# writes again if this table is ever wrong.
_STATEMENT_KINDS: dict[str, bool] = {
    "SELECT": True,
    "EXPLAIN": False,  # runs as the statement it explains does (_explained)
    "MULTI": False,  # a PIVOT without an IN list runs as a SELECT (_is_pivot)
    "INVALID": False,
    "INSERT": False,
    "UPDATE": False,
    "CREATE": False,
    "DELETE": False,
    "PREPARE": False,
    "EXECUTE": False,
    "ALTER": False,
    "TRANSACTION": False,
    "COPY": False,
    "ANALYZE": False,
    "VARIABLE_SET": False,
    "CREATE_FUNC": False,
    "DROP": False,
    "EXPORT": False,
    "PRAGMA": False,
    "VACUUM": False,
    "CALL": False,
    "SET": False,
    "LOAD": False,
    "RELATION": False,
    "EXTENSION": False,
    "LOGICAL_PLAN": False,
    "ATTACH": False,
    "DETACH": False,
    "COPY_DATABASE": False,
    "MERGE_INTO": False,
}
_READS = "SELECT, WITH, FROM, SHOW, DESCRIBE, SUMMARIZE, PIVOT, EXPLAIN of those"
# Blanks and comments between keywords, then a keyword.
_BLANK = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.DOTALL)
_WORD = re.compile(r"[A-Za-z_]+")
_PARENTHESES = re.compile(r"\([^()]*\)")
_POLL_S = 0.02
# Time for the child to start and open the database, before the query's clock runs.
_START_S = 30.0


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of the app's DuckDB instance and of one console query.

    ``max_process_mb`` bounds the resident memory of the process a console
    query runs in (DuckDB's ``memory_limit`` bounds only its buffer manager);
    ``max_result_bytes`` the result the app receives, whatever its row count.
    """

    time_limit_s: float = 10.0
    max_rows: int = 10_000
    memory_limit: str = "1GB"
    threads: int = 2
    max_temp_directory_size: str = "1GB"
    max_process_mb: int = 1536
    max_result_bytes: int = 32 * 1024 * 1024


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
    """Runs one user statement at a time, in a child process, on the database
    file of the locked connection."""

    engine = "DuckDB"
    # What the console lists (ClickHouseSandbox has its own).
    views = ("spans", "tool_calls", "attempts", "conversations", "findings")

    def __init__(
        self, connection: duckdb.DuckDBPyConnection, limits: SandboxLimits = SandboxLimits()
    ) -> None:
        self._connection = connection
        self.limits = limits

    def run(self, sql: str) -> SandboxResult:
        """Run ``sql`` and return its first rows, or raise a :class:`DashboardError`."""
        check_statement(sql)
        started = time.monotonic()
        reply = _run_in_child(self._database_path(), sql, self.limits)
        return _result(reply, self.limits, time.monotonic() - started)

    def describe(self, view: str) -> SandboxResult:
        """``DESCRIBE`` of one of the app's own views, on the app's connection
        (no child process: the statement is the app's, not the user's)."""
        started = time.monotonic()
        cursor = self._connection.cursor()
        try:
            relation = cursor.sql(f'DESCRIBE "{view.replace(chr(34), "")}"')
            columns, rows = list(relation.columns), relation.fetchall()
        except duckdb.Error as exc:
            raise QueryFailed(_first_line(exc)) from exc
        finally:
            cursor.close()
        return SandboxResult(columns, rows, False, time.monotonic() - started)

    def _database_path(self) -> str:
        cursor = self._connection.cursor()
        try:
            row = cursor.execute(
                "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
            ).fetchone()
        finally:
            cursor.close()
        if not row or not row[0]:
            raise DashboardError("the SQL console needs a database file")
        return str(row[0])


def check_statement(sql: str) -> None:
    """Refuse anything but one read statement (``QueryRefused``); parse errors
    are ``QueryFailed`` with DuckDB's message."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryFailed(_first_line(exc)) from exc
    if not statements:
        raise QueryRefused("Enter a query: the console got no SQL statement.")
    if len(statements) > 1:
        raise QueryRefused(f"One statement at a time: got {len(statements)}.")
    kind = _kind(statements[0])
    if kind == "EXPLAIN":
        kind = _explained(sql)
    elif kind == "MULTI" and _is_pivot(sql):
        kind = "SELECT"
    if not _STATEMENT_KINDS.get(kind, False):
        raise QueryRefused(f"Refused: the SQL console only reads ({_READS}), not {kind}.")


def _kind(statement: Any) -> str:
    try:
        return str(statement.type.name)
    except ValueError:
        # A type the Python enum does not know (UPDATE EXTENSIONS is 29 today).
        return "an unknown statement type"


def _explained(sql: str) -> str:
    """The kind of the statement an EXPLAIN [ANALYZE] [(options)] explains:
    EXPLAIN ANALYZE runs it, so it must be one the console runs itself."""
    position = _skip_blank(sql, 0)
    for keyword in ("EXPLAIN", "ANALYZE"):
        word = _WORD.match(sql, position)
        if word and word.group().upper() in {keyword, "ANALYSE"}:
            position = _skip_blank(sql, word.end())
    options = _PARENTHESES.match(sql, position)
    if options:
        position = _skip_blank(sql, options.end())
    inner = sql[position:]
    try:
        statements = duckdb.extract_statements(inner)
    except duckdb.Error:
        return "EXPLAIN of a statement it cannot read"
    if len(statements) != 1:
        return "EXPLAIN of a statement it cannot read"
    kind = _kind(statements[0])
    if kind == "MULTI" and _is_pivot(inner):
        return "SELECT"
    return "SELECT" if kind == "SELECT" else f"EXPLAIN {kind}"


def _is_pivot(sql: str) -> bool:
    """A MULTI statement that is a PIVOT (without an IN list DuckDB first
    collects the pivot values: a read, split in two statements)."""
    word = _WORD.match(sql, _skip_blank(sql, 0))
    return bool(word and word.group().upper() == "PIVOT")


def _skip_blank(sql: str, position: int) -> int:
    match = _BLANK.match(sql, position)
    return match.end() if match else position


def _run_in_child(db_path: str, sql: str, limits: SandboxLimits) -> tuple[Any, ...]:
    """Run the query in ``_sandbox_worker``; kill it past the time or memory limit."""
    request = pickle.dumps({"db_path": db_path, "sql": sql, "limits": asdict(limits)})
    child = subprocess.Popen(
        [sys.executable, "-m", "toolspan.dashboard._sandbox_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(request)
        child.stdin.close()
        return _watch(child, _Reader(child.stdout), limits)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout:
            child.stdout.close()


def _watch(
    child: subprocess.Popen[bytes], reader: _Reader, limits: SandboxLimits
) -> tuple[Any, ...]:
    # Starting Python and opening the database does not count: the query's
    # clock starts when the child says it is connected.
    deadline, started = time.monotonic() + _START_S, False
    while not reader.done.is_set():
        if not started and reader.ready.is_set():
            deadline, started = time.monotonic() + limits.time_limit_s, True
        if _resident_mb(child.pid) > limits.max_process_mb:
            child.kill()
            return ("memory",)
        if time.monotonic() > deadline:
            child.kill()
            return ("timeout",) if started else ("failed", "the query process did not start")
        reader.done.wait(_POLL_S)
    reply = reader.reply()
    return reply if reply is not None else ("failed", _died(child))


class _Reader:
    """Reads the child's ready byte and pickled reply on a thread, so that the
    watch loop never blocks on the pipe."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.ready, self.done = threading.Event(), threading.Event()
        self._data = b""
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[bytes]) -> None:
        try:
            if stream.read(1) == b"R":
                self.ready.set()
                self._data = stream.read()
        except (OSError, ValueError):
            pass
        finally:
            self.done.set()

    def reply(self) -> tuple[Any, ...] | None:
        try:
            reply = pickle.loads(self._data)  # noqa: S301 - our own child's reply
        except (pickle.UnpicklingError, EOFError, ValueError):
            return None
        return reply if isinstance(reply, tuple) else None


def _resident_mb(pid: int) -> float:
    """The resident memory of ``pid`` in MB (0 when it has ended)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:  # noqa: PTH123
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError):
        return 0.0


def _died(child: subprocess.Popen[bytes]) -> str:
    code = child.wait()
    return f"the query process ended unexpectedly (exit code {code})"


def _result(reply: tuple[Any, ...], limits: SandboxLimits, elapsed_s: float) -> SandboxResult:
    outcome = reply[0]
    if outcome == "ok":
        _, columns, rows = reply
        return SandboxResult(
            columns=list(columns),
            rows=rows[: limits.max_rows],
            truncated=len(rows) > limits.max_rows,
            elapsed_s=elapsed_s,
        )
    if outcome == "timeout":
        raise QueryTimeout(
            f"Stopped after {limits.time_limit_s:g} s: the query ran past the "
            "console's time limit. Aggregate or filter more, or add a LIMIT."
        )
    if outcome == "memory":
        raise QueryMemoryExceeded(
            f"Stopped: the query used too much memory (more than {limits.max_process_mb:,} MB). "
            "Aggregate or filter more, or select fewer or shorter columns."
        )
    if outcome == "too_large":
        raise ResultTooLarge(
            f"Result too large: more than {human_size(limits.max_result_bytes)} after "
            f"{reply[1]:,} rows. Select fewer or shorter columns, or add a LIMIT."
        )
    if outcome == "error":
        raise _refusal_or_failure(reply[1], reply[2])
    raise QueryFailed(f"The query failed: {reply[1] if len(reply) > 1 else outcome}")


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


def _refusal_or_failure(kind: str, message: str) -> DashboardError:
    for needle, explanation in _REFUSALS:
        if needle in message:
            return QueryRefused(f"{explanation} (DuckDB: {_first_line_of(message)})")
    if kind == "OutOfMemoryException":
        return QueryMemoryExceeded(
            f"Stopped: the query used too much memory (DuckDB's limit): {_first_line_of(message)}"
        )
    return QueryFailed(message.strip())


def _first_line(exc: BaseException) -> str:
    return _first_line_of(str(exc)) or type(exc).__name__


def _first_line_of(message: str) -> str:
    return message.strip().splitlines()[0] if message.strip() else ""
