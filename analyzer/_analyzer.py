"""The ``Analyzer``: ingest OTLP/JSON trace files into DuckDB, query the views,
compute findings and summary figures. DuckDB does the work; Python only
orchestrates batches and reports."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

import duckdb
import orjson

from .._sql import Statements, load_statements
from . import _inputs
from ._errors import AnalyzerError, CorruptInputError, DatabaseError, QueryError
from ._model import (
    DEFAULT_MIN_REPEATS,
    BadLine,
    Finding,
    IngestReport,
    QueryResult,
    collector_paused,
    coverage,
    finding_from_row,
)

Progress = Callable[[str], None]
# Files are read in batches of about this many bytes (on disk) so that the
# staging table, and with it memory, stays bounded whatever the input size.
BATCH_BYTES = 256 * 1024 * 1024
SCHEMA_VERSION = "7"
# DuckDB's own default is 80% of the machine's RAM; past this budget its
# operators (joins, sorts, aggregates, the in-memory database itself) spill to
# the temp directory instead, so memory is bounded by the setting, not the input.
# Peak RSS is about this plus 200-500 MB DuckDB allocates outside its buffer
# manager (read buffers, the allocator's free lists). Into a database file,
# 512MB binds already at 1M spans: 1M to 4M then grow the peak by under 1.5x,
# where 2GB let the peak follow the input up to the budget (x2.1 from 1M to 4M).
DEFAULT_MEMORY_LIMIT = "512MB"
# An in-memory database is itself held under the limit: at 512MB it spilled
# from 1M spans on, costing a third more CPU. 2GB holds about 2M spans.
DEFAULT_IN_MEMORY_LIMIT = "2GB"
# Recomputes the tool calls and attempts of the traces ingested since the last
# refresh (derive.sql): their tool spans, the fingerprints they lack, the calls
# and attempts; then the findings.
_FORGET_TOUCHED = ("forget_touched_calls", "forget_touched_attempts")
_FORGET_PENDING = ("forget_pending", "forget_pending_batches")
_DERIVE_FINDINGS = ("forget_findings", "insert_findings")
# Only the findings of the conversations (and idempotency keys) the refresh
# touched (findings.sql, toolspan_finding_calls), when they are few.
_SCOPE_OLD = ("scope_old_conversations", "scope_old_keys")
_SCOPE_NEW = ("scope_new_conversations", "scope_new_keys")
_DERIVE_SCOPED_FINDINGS = (
    "forget_scoped_findings",
    "scope_calls",
    "scope_key_calls",
    "insert_scoped_findings",
)
_FORGET_SCOPE = (
    "forget_finding_scope_conversations",
    "forget_finding_scope_keys",
    "forget_scope_calls",
    "forget_scope_key_calls",
)
# Scoped findings pay while the touched calls are under this share of all
# calls: past it, recomputing every finding costs less than the scoping joins.
_SCOPED_SHARE = 4
_FINDINGS_PER_FETCH = 10_000
# The typed read's default buffer (maximum_object_size in read_batch.sql).
_DEFAULT_OBJECT_SIZE = 16 * 1024 * 1024
_SCRATCH_FILE = re.compile(r' in file "[^"]*",?')
# What DuckDB raises for malformed JSON, wrong shapes and truncated compressed
# data: such a file is read again line by line to name its corrupt lines.
_UNREADABLE_FILE_ERRORS = (
    duckdb.InvalidInputException,
    duckdb.ConversionException,
    duckdb.IOException,
)


def _sql(file_stem: str) -> Statements:
    """The named statements of ``sql/<file_stem>.sql``."""
    return load_statements(__package__, f"sql/{file_stem}.sql")


def _statement(file_stem: str, name: str) -> str:
    """One named statement of ``sql/<file_stem>.sql``."""
    return _sql(file_stem)[name]


def _reader_error(exc: duckdb.Error) -> str:
    """DuckDB's reason, without the scratch file it read."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return _SCRATCH_FILE.sub("", first)


def _canonical_json_function() -> Callable[[str], str]:
    """``toolspan_canonical_json``: canonical JSON (sorted keys, no whitespace) of
    a text, or the text itself when it is not JSON, so argument and result
    equality ignores key order. The tracer's canonical JSON, so both sides
    compare the same bytes; imported here, when a refresh first needs the
    function, not per row and not at import: importing the tracer package (its
    executor, JSON Schema) cost ~0.07 CPU s per analysis, and toolspan's own
    spans carry their hashes."""
    from ..tracer._canonical import canonical_json

    def canonical(text: str) -> str:
        try:
            return canonical_json(orjson.loads(text)).decode()
        except orjson.JSONDecodeError:
            return text

    return canonical


def _spill_directory(
    db_path: str | os.PathLike[str] | None, temp_directory: str | os.PathLike[str] | None
) -> str:
    """Where DuckDB spills past its memory limit: ``temp_directory``, or beside
    a database file (DuckDB's own ``FILE.tmp``), or a private directory for an
    in-memory database (DuckDB's default there is ``.tmp`` in the working directory)."""
    if temp_directory is not None:
        return os.fspath(temp_directory)
    if db_path is not None:
        return f"{os.fspath(db_path)}.tmp"
    return tempfile.mkdtemp(prefix="toolspan-spill-")


class _BatchRead(NamedTuple):
    """What reading a batch found: its files, per-file (lines, spans) counts of
    the typed read, lines per file, corrupt lines."""

    files: list[Path]
    counts: dict[str, tuple[int, int]]
    lines: dict[Path, int]
    bad: list[BadLine]


class Analyzer:
    """A DuckDB database of ingested spans with the analyzer's views."""

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        *,
        read_only: bool = False,
        memory_limit: str | None = None,
        temp_directory: str | os.PathLike[str] | None = None,
    ):
        target = ":memory:" if db_path is None else os.fspath(db_path)
        if read_only and db_path is None:
            raise DatabaseError("an in-memory database cannot be opened read-only")
        self._scratch_owned = db_path is None and temp_directory is None
        self._scratch = _spill_directory(db_path, temp_directory)
        if memory_limit is None:
            memory_limit = DEFAULT_IN_MEMORY_LIMIT if db_path is None else DEFAULT_MEMORY_LIMIT
        self._memory_limit = memory_limit
        try:
            self._con = duckdb.connect(
                target,
                read_only=read_only,
                config={"memory_limit": memory_limit, "temp_directory": self._scratch},
            )
        except (duckdb.ParserException, duckdb.InvalidInputException) as exc:
            self._remove_scratch()
            raise AnalyzerError(
                f"invalid memory limit {memory_limit!r} (a size such as 2GB or 512MB): "
                f"{_reader_error(exc)}"
            ) from exc
        except duckdb.Error as exc:
            self._remove_scratch()
            raise DatabaseError(f"cannot open database {target}: {exc}") from exc
        self._read_only = read_only
        self._in_transaction = False
        self._con.execute(_statement("session", "settings"))
        # toolspan_canonical_json is registered when a refresh first needs it.
        self._canonical_json_registered = False
        # The stage's macros are made with the first batch's stage (_stage).
        self._stage_macros_made = False
        if not read_only:
            try:
                self._create_schema()
            except BaseException:
                self._con.close()
                raise

    # -- lifecycle -------------------------------------------------------------

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The underlying DuckDB connection."""
        return self._con

    def close(self) -> None:
        """Close the database (and remove the spill directory it made)."""
        self._con.close()
        self._remove_scratch()

    def _remove_scratch(self) -> None:
        if self._scratch_owned:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> Analyzer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _create_schema(self) -> None:
        self._check_schema_version()
        self._run_script("schema")
        self._run_script("views")
        self._run_script("findings")
        self._execute(_statement("derive", "side_effect_macro"))
        self._execute(_statement("derive", "recorded_macro"))
        self._execute(_statement("derive", "json_text_macro"))
        self._execute(_statement("derive", "remember_old_pending"))
        self._execute(_statement("schema_check", "write_schema_version"), [SCHEMA_VERSION])

    def _check_schema_version(self) -> None:
        self._execute(_statement("schema_check", "meta_table"))
        row = self._execute(_statement("schema_check", "schema_version")).fetchone()
        if row and row[0] != SCHEMA_VERSION:
            raise DatabaseError(
                f"the database was written by another version of the analyzer (schema "
                f"{row[0]}, this one writes {SCHEMA_VERSION}): "
                "ingest the traces into a new database"
            )

    def _run_script(self, file_stem: str) -> None:
        for sql in _sql(file_stem).values():
            self._execute(sql)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction; inside another one, part of that one."""
        if self._in_transaction:
            yield
            return
        self._execute(_statement("session", "begin"))
        self._in_transaction = True
        try:
            yield
            self._execute(_statement("session", "commit"))
        except BaseException:
            self._con.execute(_statement("session", "rollback"))
            raise
        finally:
            self._in_transaction = False

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        try:
            return self._con.execute(sql, list(params))
        except duckdb.Error as exc:
            raise DatabaseError(f"{type(exc).__name__}: {exc}") from exc

    @property
    def memory_limit(self) -> str:
        """The memory limit given, or the default: ``DEFAULT_MEMORY_LIMIT``
        (512MB) into a database file, ``DEFAULT_IN_MEMORY_LIMIT`` (2GB) in memory."""
        return self._memory_limit

    def spilled_bytes(self) -> int:
        """Bytes DuckDB keeps in its temp directory now: for an in-memory
        database, its own blocks once it outgrew the memory limit."""
        row = self._execute(_statement("session", "spilled_bytes")).fetchone()
        return int(row[0]) if row else 0

    def defer_checkpoints(self) -> None:
        """Checkpoint only when the write-ahead log passes 256 MB or
        :meth:`checkpoint` is called: for a caller that ingests small batches
        often and checkpoints when it is idle (``toolspan serve``). Committed
        rows are as durable either way (the log is replayed on open)."""
        self._execute(_statement("session", "defer_checkpoints"))

    def checkpoint(self) -> None:
        """Merge the write-ahead log into the database file: the file alone then
        holds every committed row (and can be copied)."""
        self._execute(_statement("session", "checkpoint"))

    # -- SQL -------------------------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] = ()) -> QueryResult:
        """Run one SQL query over the views; DuckDB errors become ``QueryError``."""
        try:
            cursor = self._con.execute(sql, list(params))
            columns = tuple(d[0] for d in cursor.description or ())
            rows = cursor.fetchall() if cursor.description else []
        except duckdb.Error as exc:
            raise QueryError(str(exc)) from exc
        return QueryResult(columns, rows)

    # -- analysis --------------------------------------------------------------

    def set_write_tools(self, patterns: Sequence[str]) -> None:
        """Name the tools that write (names or glob patterns such as ``send_*``).

        A tool that matches is a write, even when its spans declare otherwise;
        other spans that do not say themselves (other instrumentations) become
        ``none``. An empty list means unknown. Recomputes ``side_effect`` and
        the findings when the list changes.
        """
        if isinstance(patterns, str):
            raise TypeError("set_write_tools takes a sequence of patterns, not a string")
        wanted = sorted(dict.fromkeys(p.strip() for p in patterns if p.strip()))
        with self._transaction():
            current = self._execute(_statement("write_tools", "list_write_tools")).fetchall()
            changed = [row[0] for row in current] != wanted
            if changed:
                self._execute(_statement("write_tools", "forget_write_tools"))
                for pattern in wanted:
                    self._execute(_statement("write_tools", "add_write_tool"), [pattern])
                self._execute(_statement("derive", "update_side_effects"))
            self._refresh(findings=changed)

    def findings(self, *, min_repeats: int = DEFAULT_MIN_REPEATS) -> list[Finding]:
        """Every finding (``FINDING_KINDS``): loops, duplicate writes, idempotency
        conflicts, unsafe retries, key churn, writes after an unknown outcome,
        retried permanent errors and parallel writes on one resource."""
        if min_repeats < 2:
            raise ValueError("min_repeats must be at least 2")
        if not self._read_only:
            self._refresh()
        if min_repeats == DEFAULT_MIN_REPEATS:
            sql, params = _statement("summary", "findings"), []
        else:
            sql, params = _statement("summary", "findings_min_repeats"), [min_repeats]
        cursor = self._execute(sql, params)
        found: list[Finding] = []
        with collector_paused():
            # In chunks: the rows of every finding and their Finding objects
            # never coexist (each finding's are ~1.5 KB of Python objects).
            while rows := cursor.fetchmany(_FINDINGS_PER_FETCH):
                found.extend(finding_from_row(row) for row in rows)
        return found

    def _refresh(self, *, findings: bool = False) -> None:
        """Bring the materialised rows up to date with the spans ingested so far."""
        pending = self._count("count_pending_traces") > 0
        if not (pending or findings):
            return
        with self._transaction():
            scoped = self._derive_touched(scope=not findings) if pending else False
            self._derive(_DERIVE_SCOPED_FINDINGS if scoped else _DERIVE_FINDINGS)
            self._derive(_FORGET_SCOPE)

    def _derive_touched(self, *, scope: bool) -> bool:
        """Recompute the calls and attempts of the pending traces; whether the
        findings in scope (their conversations and keys) are all that changed
        and few enough to recompute alone (``scope`` allows it)."""
        [(first_rowid, known)] = self._execute(_statement("derive", "refresh_scope")).fetchall()
        self._derive(("touched_traces", "attribute_positions"))
        self._execute(_statement("derive", "extract_tool_spans"), [first_rowid])
        self._extract_requested_calls(first_rowid)
        [(unfingerprinted, weak, touched)] = self._execute(
            _statement("derive", "count_touched_tool_spans")
        ).fetchall()
        scoped = scope and self._count("count_calls", "derive") > _SCOPED_SHARE * touched
        if scoped and known:
            self._derive(_SCOPE_OLD)
        if unfingerprinted:
            self._fingerprint_tool_spans()
        self._execute(_statement("derive", "trace_conversations"), [first_rowid])
        if known:
            # Traces new to the database have no calls or attempts to forget.
            self._derive(_FORGET_TOUCHED)
        self._derive(["insert_tool_calls"])
        if weak:
            self._derive(["forget_dominated_calls"])
        if scoped:
            self._derive(_SCOPE_NEW)
        self._derive(["insert_attempts", *_FORGET_PENDING])
        return scoped

    def _extract_requested_calls(self, first_rowid: int) -> None:
        """The model's requested tool calls (derive.sql, extract_requested_calls)
        among the touched tool spans, less those a tool span stands for; the
        LLM spans are read only when some shape names output messages."""
        self._derive(["requested_positions"])
        if self._count("count_requested_positions", "derive"):
            self._execute(_statement("derive", "extract_requested_calls"), [first_rowid])
            self._derive(["forget_executed_requests"])

    def _derive(self, names: Sequence[str]) -> None:
        for name in names:
            self._execute(_statement("derive", name))

    def _fingerprint_tool_spans(self) -> None:
        """Fingerprint the touched tool spans that carry no hash (derive.sql,
        count_touched_tool_spans), registering the canonical JSON function on
        first need: registering a Python function imports numpy into DuckDB."""
        if not self._canonical_json_registered:
            self._con.create_function(
                "toolspan_canonical_json",
                _canonical_json_function(),
                ["VARCHAR"],
                "VARCHAR",
                side_effects=False,
            )
            self._canonical_json_registered = True
        self._derive(
            [
                "canonical_requested_arguments",
                "fingerprint_requested_calls",
                "fingerprint_tool_spans",
            ]
        )

    def summary(self) -> dict[str, Any]:
        """The summary figures: calls, attempts, retries, statuses by tool, waits, bad
        lines, and the coverage (what was read, what was recognised in it)."""
        totals = self._named_row("totals")
        inputs = self._named_row("inputs")
        by_tool: dict[str, dict[str, int]] = {}
        for tool, status, calls in self._execute(
            _statement("summary", "statuses_by_tool")
        ).fetchall():
            by_tool.setdefault(tool, {})[status] = int(calls)
        try:
            cover = coverage_of(self._con)
        except duckdb.Error as exc:
            raise DatabaseError(f"{type(exc).__name__}: {exc}") from exc
        return {
            **inputs,
            **totals,
            "scheduled_wait_s": float(totals["scheduled_wait_s"]),
            "statuses_by_tool": by_tool,
            "coverage": cover,
        }

    def _named_row(self, name: str) -> dict[str, Any]:
        cursor = self._execute(_statement("summary", name))
        row = cursor.fetchone() or ()
        return {d[0]: value for d, value in zip(cursor.description or (), row, strict=True)}

    # -- ingest ----------------------------------------------------------------

    def ingest(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        strict: bool = False,
        progress: Progress | None = None,
    ) -> IngestReport:
        """Read trace files (files, directories, globs; plain, .gz, .zst) into the database.

        Files already ingested (same path, size and modification time) are
        skipped; spans already present (same trace and span id) are not added
        again. Corrupt lines are reported and skipped, or with ``strict=True``
        make the whole call fail without adding anything.
        """
        if self._read_only:
            raise DatabaseError("the database is open read-only")
        files = _inputs.resolve(paths)
        new_files = self._new_files(files)
        spans_before = self._count("count_spans")
        lines = 0
        bad: list[BadLine] = []
        try:
            for batch in _inputs.batches(new_files, batch_bytes=BATCH_BYTES):
                if progress:
                    progress(f"reading {len(batch.files)} file(s), {_megabytes(batch.files)} MB")
                batch_lines, batch_bad = self._ingest_batch(batch, strict=strict)
                lines += batch_lines
                bad.extend(batch_bad)
        finally:
            # Also after a failed batch: the batches before it were committed.
            self._refresh()
        spans_added = self._count("count_spans") - spans_before
        if progress and new_files:
            progress(f"ingested {len(new_files)} file(s): {lines} lines, {spans_added} new spans")
        return IngestReport(
            files=len(new_files),
            lines=lines,
            spans=spans_added,
            skipped_files=len(files) - len(new_files),
            bad_lines=tuple(bad),
        )

    def _new_files(self, files: list[Path]) -> list[Path]:
        """The files not ingested before with the same size and modification time."""
        stats = [path.stat() for path in files]
        rows = self._execute(
            _statement("ingest", "ingested_among"),
            [
                [str(path) for path in files],
                [stat.st_size for stat in stats],
                [stat.st_mtime_ns for stat in stats],
            ],
        ).fetchall()
        done = {row[0] for row in rows}
        return [path for path in files if str(path) not in done]

    def _count(self, name: str, file_stem: str = "ingest") -> int:
        """The count the ``count_*`` statement ``name`` of ``file_stem``.sql returns."""
        rows = self._execute(_statement(file_stem, name)).fetchall()
        return int(rows[0][0]) if rows else 0

    def _ingest_batch(self, batch: _inputs.Batch, *, strict: bool) -> tuple[int, list[BadLine]]:
        slow_files, bad = self._stage(batch)
        if bad and strict:
            self._execute(_statement("ingest", "drop_stage"))
            raise CorruptInputError(_corrupt_message(bad))
        counts = self._file_counts()
        lines = {path: counts.get(str(path), (0, 0))[0] for path in batch.files}
        lines.update(slow_files)
        self._commit_batch(_BatchRead(batch.files, counts, lines, bad))
        return sum(lines.values()), bad

    def _stage(self, batch: _inputs.Batch) -> tuple[dict[Path, int], list[BadLine]]:
        """Fill the ``stage`` table from the batch; corrupt files go the slow way.

        Returns the line counts of the files read line by line and their bad lines.
        """
        if not self._stage_macros_made:
            self._execute(_statement("read_batch", "or_null_macro"))
            self._execute(_statement("read_batch", "read_batch_macro"))
        # Cut-off .zst files go the slow way, which keeps the lines before the
        # cut and reports the damage.
        failed = self._read_into_stage(batch) + batch.cut_off
        scratch = batch.scratch
        if not self._stage_macros_made:
            # Once per connection (they are temporary): a macro binds its
            # tables when it is created, the stage's among them, and again on
            # every use, so they outlive the stage each batch drops and makes
            # again. Per batch they cost ~8 ms of one core each time.
            for name in (
                "span_ok_macro",
                "keys_ok_macro",
                "check_stage_macro",
                "staged_spans_macro",
            ):
                self._execute(_statement("ingest", name))
            self._stage_macros_made = True
        suspects, failed_again = self._check_stage()
        failed += failed_again
        for suspect in suspects:
            self._execute(_statement("ingest", "unstage_file"), [str(suspect)])
        slow_lines: dict[Path, int] = {}
        bad: list[BadLine] = []
        for path in sorted(set(failed) | suspects):
            slow_lines[path], file_bad = self._stage_slowly(path, scratch / str(len(slow_lines)))
            bad.extend(file_bad)
        return slow_lines, bad

    def _check_stage(self) -> tuple[set[Path], list[Path]]:
        """The staged files to read line by line (suspect), and those that failed
        the typed read again. A file whose ids are not all lowercase hex is read
        again with its ids lowercased (not every file: lowercasing every id cost
        more than this check), then checked again."""
        rows = self._execute(_statement("ingest", "check_stage")).fetchall()
        suspects = {
            Path(path) for path, to_lowercase, suspect in rows if suspect and not to_lowercase
        }
        mixed_case = [Path(path) for path, to_lowercase, _ in rows if to_lowercase]
        if not mixed_case:
            return suspects, []
        for path in mixed_case:
            self._execute(_statement("ingest", "unstage_file"), [str(path)])
        failed = self._read_files(mixed_case, slow=True)
        again = self._execute(
            _statement("ingest", "check_staged_files"),
            [[str(path) for path in mixed_case if path not in failed]],
        ).fetchall()
        suspects.update(Path(path) for path, _, suspect in again if suspect)
        return suspects, failed

    def _stage_slowly(self, path: Path, scratch: Path) -> tuple[int, list[BadLine]]:
        """Stage the valid spans of one file read line by line; (lines, bad lines)."""
        scratch.mkdir()
        good_copy = scratch / "good.jsonl"
        with good_copy.open("wb") as good_out:
            read = _inputs.filter_good_lines(path, good_out)
        bad = list(read.bad)
        if read.kept:
            self._stage_copy(path, good_copy, read.kept, read.longest, bad)
        for number, raw in read.unchecked:
            self._stage_unchecked(path, number, raw, scratch, bad)
        return read.lines, sorted(bad, key=lambda b: b.line)

    def _stage_copy(
        self,
        path: Path,
        copy: Path,
        kept: list[tuple[int, int, int]],
        longest: int,
        bad: list[BadLine],
    ) -> None:
        """Stage a good-lines copy, credited to ``path``. Lines the typed read
        still rejects (a repeated key, a shape it alone checks) are found by
        halving the copy, so one such line costs O(log n) reads, not the file."""
        try:
            self._insert_stage([copy], longest=longest, slow=True)
        except duckdb.OutOfMemoryException as exc:
            # Lines are split to fit (_inputs.split_request); what still does
            # not fit is one span too large for the limit: reported, not fatal.
            if len(kept) == 1:
                reason = f"too large for --memory-limit {self._memory_limit}: {_reader_error(exc)}"
                bad.append(BadLine(str(path), kept[0][0], reason))
                return
            for half, half_kept in _inputs.split_copy(copy, kept):
                self._stage_copy(path, half, half_kept, max(k[2] for k in half_kept), bad)
            return
        except _UNREADABLE_FILE_ERRORS as exc:
            if len(kept) == 1:
                self._stage_rejected_line(path, copy, kept[0][0], exc, bad)
                return
            for half, half_kept in _inputs.split_copy(copy, kept):
                self._stage_copy(path, half, half_kept, longest, bad)
            return
        self._execute(_statement("ingest", "rename_staged_file"), [str(path), str(copy)])

    def _stage_rejected_line(
        self, path: Path, copy: Path, number: int, exc: duckdb.Error, bad: list[BadLine]
    ) -> None:
        # A repeated key is the usual cause: the line re-serialised keeps the
        # last value, as the line checker read it.
        again = _inputs.normalised(copy.read_bytes())
        if again is not None:
            retry = copy.with_name(copy.name + ".normalised.jsonl")
            retry.write_bytes(again + b"\n")
            try:
                self._insert_stage([retry], longest=len(again) + 1, slow=True)
            except _UNREADABLE_FILE_ERRORS:
                pass
            else:
                self._execute(_statement("ingest", "rename_staged_file"), [str(path), str(retry)])
                return
        bad.append(BadLine(str(path), number, f"not readable as OTLP/JSON: {_reader_error(exc)}"))

    def _stage_unchecked(
        self, path: Path, number: int, raw: bytes, scratch: Path, bad: list[BadLine]
    ) -> None:
        """Stage one line too deeply nested for the line checker: the typed read
        parses it, and its invalid spans are removed from the stage."""
        alone = scratch / f"line-{number}.jsonl"
        alone.write_bytes(raw if raw.endswith(b"\n") else raw + b"\n")
        try:
            self._insert_stage([alone], longest=len(raw) + 1, slow=True)
        except _UNREADABLE_FILE_ERRORS as exc:
            bad.append(
                BadLine(str(path), number, f"not readable as OTLP/JSON: {_reader_error(exc)}")
            )
            return
        removed = self._execute(_statement("ingest", "unstage_bad_spans"), [str(alone)]).fetchall()
        if removed:
            bad.append(
                BadLine(
                    str(path),
                    number,
                    f"{len(removed)} span(s) with an invalid id, attribute key or time "
                    "(the line nests too deeply to say which)",
                )
            )
        self._execute(_statement("ingest", "rename_staged_file"), [str(path), str(alone)])

    def _read_into_stage(self, batch: _inputs.Batch) -> list[Path]:
        """Make the stage and read the batch into it (the typed read). Returns
        the files to read line by line: those DuckDB could not parse or decompress.

        The typed read of the whole batch makes the stage itself: making it
        empty first (from an empty file) cost ~8 ms of one core per batch. When
        that read fails, the stage is made empty and the files are read one by
        one; a bundle that fails is read file by file."""
        if batch.whole and not batch.bundles:
            try:
                self._con.execute(
                    _statement("ingest", "create_stage"), [[str(p) for p in batch.whole]]
                )
                return []
            except duckdb.Error:
                pass  # find the file(s) at fault, in a stage made empty
        empty = batch.scratch / "empty.jsonl"
        empty.touch()
        self._execute(_statement("ingest", "create_stage"), [[str(empty)]])
        if not batch.bundles:
            return self._read_each(batch.whole)
        failed = self._read_files(batch.whole)
        for bundle, inside in batch.bundles:
            try:
                self._con.execute(
                    _statement("ingest", "insert_bundle_stage"),
                    [[str(bundle)], [str(path) for path in inside]],
                )
            except _UNREADABLE_FILE_ERRORS:
                failed += self._read_files(inside)  # a bad file in the bundle
            except duckdb.Error as exc:
                raise DatabaseError(f"reading {len(inside)} small files: {exc}") from exc
        return failed

    def _read_files(self, batch: list[Path], *, slow: bool = False) -> list[Path]:
        """Typed read of ``batch`` into the stage, file by file if that fails;
        returns the files DuckDB could not parse or decompress."""
        if not batch:
            return []
        try:
            self._insert_stage(batch, slow=slow)
            return []
        except duckdb.Error:
            return self._read_each(batch, slow=slow)  # find the file(s) at fault

    def _read_each(self, batch: list[Path], *, slow: bool = False) -> list[Path]:
        """Typed read of each file of ``batch`` into the stage on its own;
        returns those DuckDB could not parse or decompress."""
        failed: list[Path] = []
        for path in batch:
            try:
                self._insert_stage([path], slow=slow)
            except (*_UNREADABLE_FILE_ERRORS, duckdb.OutOfMemoryException):
                # Out of memory: the slow way cuts long lines to fit, and
                # reports with file:line what still does not.
                failed.append(path)
            except duckdb.Error as exc:
                # Not the file's fault (out of memory, ...): not a corrupt line.
                raise DatabaseError(f"reading {path}: {type(exc).__name__}: {exc}") from exc
        return failed

    def _insert_stage(self, files: list[Path], *, longest: int = 0, slow: bool = False) -> None:
        """The typed read of ``files`` into the stage; ``slow`` for the slow paths'
        reads (ids lowercased, each span with its own key list, read_batch.sql)."""
        names = [str(f) for f in files]
        if longest <= _DEFAULT_OBJECT_SIZE:
            name = "insert_slow_stage" if slow else "insert_stage"
            self._con.execute(_statement("ingest", name), [names])
        else:
            # A buffer for the longest line (bounded by _inputs.MAX_LINE_BYTES).
            size = longest + 1024
            self._con.execute(_statement("ingest", "insert_long_lines_stage"), [names, size])

    def _file_counts(self) -> dict[str, tuple[int, int]]:
        rows = self._execute(_statement("ingest", "file_counts")).fetchall()
        return {str(path): (int(lines), int(spans)) for path, lines, spans in rows}

    def _commit_batch(self, read: _BatchRead) -> None:
        try:
            with self._transaction():
                self._remember_attribute_shapes()
                duplicates = self._execute(_statement("ingest", "duplicate_spans")).fetchone()
                if duplicates and duplicates[0]:
                    self._execute(_statement("ingest", "deduplicate_stage"))
                self._execute(_statement("ingest", "batch_traces"))
                known = self._count("count_known_traces")
                # span_rows is only appended to: its next rowid is its count.
                first_rowid = self._count("count_spans")
                if known:
                    stored = ("insert_spans", "remember_stored_traces")
                else:
                    stored = ("insert_new_spans", "remember_new_stored_traces")
                for name in (*stored, "remember_pending_traces"):
                    self._execute(_statement("ingest", name))
                self._execute(
                    _statement("ingest", "remember_pending_batch"), [first_rowid, known > 0]
                )
                self._remember_files(read)
        finally:
            self._con.execute(_statement("ingest", "drop_stage"))
            self._con.execute(_statement("ingest", "drop_batch_traces"))

    def _remember_attribute_shapes(self) -> None:
        """Store the batch's new lists of attribute keys (spans hold their hash)."""
        collisions = self._execute(_statement("ingest", "shape_collisions")).fetchall()
        if collisions:
            raise DatabaseError(
                f"{len(collisions)} different lists of attribute keys have the same hash "
                f"({collisions[0][0]}): this batch cannot be stored; please report it"
            )
        self._execute(_statement("ingest", "remember_attribute_shapes"))

    def _remember_files(self, read: _BatchRead) -> None:
        batch, counts, lines, bad = read
        bad_by_file: dict[str, int] = {}
        for line in bad:
            bad_by_file[line.path] = bad_by_file.get(line.path, 0) + 1
        now = datetime.now(UTC).replace(tzinfo=None)
        stats = [path.stat() for path in batch]
        self._execute(
            _statement("ingest", "remember_files"),
            [
                [str(path) for path in batch],
                [stat.st_size for stat in stats],
                [stat.st_mtime_ns for stat in stats],
                [lines[path] for path in batch],
                [counts.get(str(path), (0, 0))[1] for path in batch],
                [bad_by_file.get(str(path), 0) for path in batch],
                now,
            ],
        )
        if bad:
            self._execute(
                _statement("ingest", "remember_bad_lines"),
                [[b.path for b in bad], [b.line for b in bad], [b.reason for b in bad]],
            )


def coverage_of(connection: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The coverage of an analyzer database (docs/analyzer.md#coverage) on any
    connection to it: the analyzer's own, or the dashboard's read-only one."""
    cursor = connection.cursor()
    try:
        by_source = cursor.execute(_statement("summary", "calls_by_source")).fetchall()
        cursor.execute(_statement("summary", "coverage"))
        row = dict(
            zip((d[0] for d in cursor.description or ()), cursor.fetchone() or (), strict=True)
        )
    finally:
        cursor.close()
    return coverage(
        spans=row["spans"],
        calls_by_source=dict(by_source),
        genai=row,
        unverifiable=row["unverifiable_calls"],
    )


def _megabytes(files: list[Path]) -> int:
    return round(sum(f.stat().st_size for f in files) / 1e6)


def _corrupt_message(bad: list[BadLine]) -> str:
    shown = "\n".join(f"  {b.path}:{b.line}: {b.reason}" for b in bad[:10])
    more = f"\n  ... and {len(bad) - 10} more" if len(bad) > 10 else ""
    return f"{len(bad)} corrupt line(s) (strict mode):\n{shown}{more}"


__all__ = ["Analyzer", "AnalyzerError"]
