"""``toolspan serve --clickhouse SOURCE``: the spans received, written into
ClickHouse as the OpenTelemetry Collector's ClickHouse exporter writes them
(its ``otel_traces`` DDL and value mapping, ``analyzer/_exporter_table.py``).

Every reader of the exporter's table then reads them: ``toolspan analyze``
and ``toolspan dashboard --source`` on the same source (the dashboard follows
the table as it grows), HyperDX, Grafana. The writer is a thread of its own
that reads the spool's sealed segments, as the analyser does: a ClickHouse
that is slow or down never slows or fails the receiver (the spool keeps every
acknowledged span on disk, and the writer catches up when ClickHouse is back);
its place, the last segment written whole, is kept in ``clickhouse.cursor``,
so that a restart writes nothing twice. The table is created with the
exporter's Map layout when it does not exist; an existing table of either
layout is written in its own.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from .._errors import ServeError
from ..analyzer._clickhouse import (
    DEFAULT_TABLE,
    _connect,
    _identifier,
    _message,
    parse_source,
    table_layout,
)
from ..analyzer._errors import AnalyzerError
from ..analyzer._exporter_table import create_table, insert_rows, rows_from_request
from ..analyzer._model import collector_paused
from ._live import _write_atomically
from ._spool import Spool, segment_number

__all__ = ["ClickHouseWriter"]

CURSOR_NAME = "clickhouse.cursor"
# Rows per insert: a few MB per block, and memory bounded by it, not by a segment.
_INSERT_ROWS = 20_000
_NS_LIMIT = 2**63  # nanoseconds a DateTime64(9) can hold (to 2262)


class ClickHouseWriter:
    """A thread that writes each sealed spool segment into ``table`` once."""

    def __init__(
        self,
        spool: Spool,
        source: str,
        directory: Path,
        *,
        table: str = DEFAULT_TABLE,
        interval_s: float = 0.5,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self._spool = spool
        try:
            self._source = parse_source(source)
        except AnalyzerError as exc:  # messages already without credentials
            raise ServeError(f"--clickhouse: {exc}") from None
        database, _, name = table.rpartition(".")
        self._database = database or self._source.database
        self._name = name
        self.table = f"{self._database}.{name}"
        self._cursor_path = directory / CURSOR_NAME
        self._interval_s = interval_s
        self._log = log or (lambda message: None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: Any = None
        self.layout = "map"
        self.written = self._read_cursor()  # segments up to this number are in the table
        self.spans = 0  # spans written since start
        self.error: str | None = None

    def display(self) -> str:
        """Where the spans go, without credentials."""
        return f"{self._source.display()} table {self.table}"

    def start(self) -> ClickHouseWriter:
        """:meth:`open`, then write as segments are sealed, on a thread."""
        self.open()
        self._thread = threading.Thread(target=self._run, name="toolspan-clickhouse", daemon=True)
        self._thread.start()
        return self

    def open(self) -> ClickHouseWriter:
        """Connect and make sure the table is there (raises ``ServeError`` if
        not); :meth:`cycle` then writes what is sealed."""
        try:
            # Every name below is qualified: the database may not exist yet.
            self._client = _connect(self._source, database="default")
            self._ensure_table()
        except AnalyzerError as exc:  # messages already without credentials
            self.close()
            raise ServeError(f"--clickhouse: {exc}") from None
        except Exception as exc:  # the driver's, which may hold the password
            self.close()
            raise ServeError(f"--clickhouse: {_message(exc, self._source)}") from None
        return self

    def stop(self) -> None:
        """Write what is sealed, then close."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _ensure_table(self) -> None:
        rows = self._client.query(
            "SELECT type FROM system.columns WHERE database = {db:String}"
            " AND table = {t:String} AND name = 'SpanAttributes'",
            parameters={"db": self._database, "t": self._name},
        ).result_rows
        if not rows:
            self._client.command(f"CREATE DATABASE IF NOT EXISTS {_identifier(self._database)}")
            table = f"{_identifier(self._database)}.{_identifier(self._name)}"
            create_table(self._client, table, "map")
            return
        layout = table_layout(rows[0][0])
        if layout is None:
            raise AnalyzerError(
                f"{self.table} is not the collector exporter's otel_traces "
                f"(SpanAttributes is {rows[0][0]})"
            )
        self.layout = layout

    def _run(self) -> None:
        while True:
            stopping = self._stop.is_set()
            try:
                worked = self.cycle()
                if self.error is not None:
                    self._log(f"writing to ClickHouse again: {self.display()}")
                self.error = None
            except Exception as exc:  # any driver error: reported once, and retried
                error = _message(exc, self._source)
                if error != self.error:
                    self._log(f"writing to ClickHouse failed (retried): {error}")
                self.error, worked = error, False
            if stopping:
                return
            if not worked:
                self._stop.wait(self._interval_s)

    def cycle(self) -> bool:
        """Write every sealed segment after the cursor; whether there was one."""
        todo = [p for p in self._spool.sealed() if segment_number(p) > self.written]
        for path in todo:
            # Mapping a segment builds a row per span, and the cyclic collector,
            # running at every few hundred of them, was half the writer's time:
            # paused per segment (the rows hold no cycles).
            with collector_paused():
                self._write(path)
            self.written = segment_number(path)
            self._write_cursor()
        return bool(todo)

    def _write(self, path: Path) -> None:
        batch: list[list[Any]] = []
        for row in self._rows(path):
            batch.append(row)
            if len(batch) >= _INSERT_ROWS:
                self.spans += self._insert(batch, path)
                batch = []
        self.spans += self._insert(batch, path)

    def _insert(self, rows: list[list[Any]], path: Path) -> int:
        """Insert ``rows``; the spans written. When a batch is refused for its
        data (a value the driver cannot encode, a constraint of the table),
        the batch is split until the spans refused are found: each is reported
        and skipped, so that one span never stops the spans after it. Any
        other failure (ClickHouse down, the table gone, a full disk) raises:
        nothing is skipped, the pass is retried."""
        if not rows:
            return 0
        table = f"{_identifier(self._database)}.{_identifier(self._name)}"
        try:
            insert_rows(self._client, rows, table, self.layout)
            return len(rows)
        except Exception as exc:
            if not _refuses_data(exc):
                raise
            if len(rows) > 1:
                half = len(rows) // 2
                return self._insert(rows[:half], path) + self._insert(rows[half:], path)
            self._log(
                f"{path}: span {rows[0][2]!r} of trace {rows[0][1]!r} not written to "
                f"ClickHouse: {_message(exc, self._source)}"
            )
            return 0

    def _rows(self, path: Path) -> Iterator[list[Any]]:
        """The table rows of a segment's requests; a line that is not an
        OTLP/JSON request is reported with its file and line, and skipped."""
        with path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    rows = list(rows_from_request(orjson.loads(line), self.layout))
                except Exception as exc:  # any shape of bad line: reported, the rest written
                    self._log(f"{path}:{number}: not written to ClickHouse: {exc!r}")
                    continue
                for row in rows:
                    # DateTime64(9) ends in 2262 and Duration is unsigned: a span
                    # outside them would fail its whole batch.
                    if 0 <= row[0] < _NS_LIMIT and 0 <= row[12] < _NS_LIMIT:
                        yield row
                    else:
                        self._log(
                            f"{path}:{number}: span {row[2]!r} not written to ClickHouse: "
                            f"its start ({row[0]} ns) or duration ({row[12]} ns) is out of range"
                        )

    def _read_cursor(self) -> int:
        try:
            return int(self._cursor_path.read_text().strip() or 0)
        except FileNotFoundError:
            return 0
        except ValueError:
            raise ServeError(f"{self._cursor_path} is damaged: remove it to write again") from None

    def _write_cursor(self) -> None:
        # Not fsynced: after a power cut the writer may write a segment again,
        # which the analysis counts once (a span is its trace and span id).
        _write_atomically(self._cursor_path, f"{self.written}\n".encode())


# ClickHouse's error codes for data it will not store: CANNOT_PARSE_* (6, 26,
# 27, 38, 41, 72), ARGUMENT_OUT_OF_BOUND (69), CANNOT_CONVERT_TYPE (70),
# INCORRECT_DATA (117), VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE (321),
# VIOLATED_CONSTRAINT (469).
_DATA_ERRORS = re.compile(r"\bCode: (6|26|27|38|41|69|70|72|117|321|469)\b")


def _refuses_data(exc: BaseException) -> bool:
    """Whether an insert failed for the rows it held, not for the server."""
    from clickhouse_connect.driver.exceptions import DataError

    return isinstance(exc, DataError) or bool(_DATA_ERRORS.search(str(exc)))
