"""The child process a console query runs in (see ``_sandbox``).

Reads one pickled request on stdin, opens the database read-only with the
sandbox configuration, writes ``R`` once connected, then the pickled reply:
``("ok", columns, rows)`` (at most ``max_rows + 1`` rows), ``("too_large",
rows_so_far)`` when the rows pass ``max_result_bytes``, or ``("error", DuckDB
exception name, message)``. The parent watches its memory and time and kills
it past either limit: nothing here needs to stop itself.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import duckdb

from toolspan.dashboard._sandbox import SandboxLimits, _config

_CHUNK_ROWS = 256


def size_of(value: Any) -> int:
    """About how many bytes ``value`` takes as a Python object."""
    if isinstance(value, str | bytes):
        return 49 + len(value)
    if isinstance(value, list | tuple):
        return 56 + 8 * len(value) + sum(size_of(item) for item in value)
    if isinstance(value, dict):
        return 64 + sum(size_of(k) + size_of(v) for k, v in value.items())
    return 32


def run(request: dict[str, Any]) -> tuple[Any, ...]:
    limits = SandboxLimits(**request["limits"])
    try:
        connection = duckdb.connect(request["db_path"], read_only=True, config=_config(limits))
    except duckdb.Error as exc:
        _ready()
        return ("error", type(exc).__name__, str(exc))
    _ready()
    try:
        # LIMIT on the relation is pushed into the plan: DuckDB stops producing
        # rows after max_rows + 1 instead of materialising the whole result.
        limited = connection.sql(request["sql"]).limit(limits.max_rows + 1)
        columns = list(limited.columns)
        cursor = connection.cursor()
        cursor.execute(limited.sql_query())
        rows: list[tuple[Any, ...]] = []
        size = 0
        while chunk := cursor.fetchmany(_CHUNK_ROWS):
            size += sum(size_of(row) for row in chunk)
            if size > limits.max_result_bytes:
                return ("too_large", len(rows) + len(chunk))
            rows.extend(chunk)
        return ("ok", columns, rows)
    except duckdb.Error as exc:
        return ("error", type(exc).__name__, str(exc))


def _ready() -> None:
    sys.stdout.buffer.write(b"R")
    sys.stdout.buffer.flush()


def main() -> None:
    request = pickle.loads(sys.stdin.buffer.read())  # noqa: S301 - from the parent
    reply = run(request)
    sys.stdout.buffer.write(pickle.dumps(reply))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
