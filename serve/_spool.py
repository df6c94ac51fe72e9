"""The spool: what the receiver accepted, as OTLP/JSON lines files on disk.

A request is acknowledged only once its line is written and fsynced, so a
SIGKILL loses nothing that was acknowledged. One writer thread appends every
pending line and fsyncs once for all of them (group commit): many small
requests cost one fsync, not one each.

Lines go to numbered segments, ``spans-0000000001.jsonl`` and on. The newest
segment is open for writing; the analyser *seals* it (starts the next) before
reading, so it only ever ingests files that never change again, and the
analyzer's own record of ingested files (path, size, modification time) is
the durable spool position. ``toolspan analyze DIR`` reads the same files.

Memory is bounded: lines accepted but not yet on disk may hold at most
``max_pending_bytes``; past that, and when the analyser lags more than
``max_lag_bytes`` behind the spool, :meth:`Spool.append` raises
:class:`Overloaded` and the receiver answers "retry later".
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path

from .._errors import Overloaded, ServeError

__all__ = ["Spool", "repair_tail", "segment_number", "segments"]

SEGMENT_PREFIX = "spans-"
_SEGMENT = re.compile(r"spans-(\d{10})\.jsonl")
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024


def segments(directory: Path) -> list[Path]:
    """The spool's segments in ``directory``, oldest first."""
    found = [p for p in directory.glob(f"{SEGMENT_PREFIX}*.jsonl") if _SEGMENT.fullmatch(p.name)]
    return sorted(found)


def segment_number(path: Path) -> int:
    """The number in a segment's name (spans-0000000001.jsonl: 1)."""
    match = _SEGMENT.fullmatch(path.name)
    assert match is not None
    return int(match.group(1))


def repair_tail(path: Path) -> int:
    """Cut a half-written last line (a write a crash interrupted, never
    acknowledged) off ``path``; returns the bytes removed."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("r+b") as handle:
        handle.seek(max(0, size - 1))
        if handle.read(1) == b"\n":
            return 0
        # Scan back for the last newline, a block at a time.
        end, block = size, 1 << 16
        keep = 0
        while end > 0:
            start = max(0, end - block)
            handle.seek(start)
            chunk = handle.read(end - start)
            at = chunk.rfind(b"\n")
            if at >= 0:
                keep = start + at + 1
                break
            end = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    return size - keep


class Spool:
    """Durable, bounded appends of OTLP/JSON lines to segment files."""

    def __init__(
        self,
        directory: Path,
        *,
        max_pending_bytes: int = 64 * 1024 * 1024,
        max_lag_bytes: int = 512 * 1024 * 1024,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        retry_after_s: float = 1.0,
    ) -> None:
        self.directory = directory
        self.max_pending_bytes = max_pending_bytes
        self.max_lag_bytes = max_lag_bytes
        self._segment_bytes = segment_bytes
        self._retry_after_s = retry_after_s
        self._lock = threading.Condition()  # the queue and the counters
        self._io = threading.Lock()  # the open segment's file
        self._queue: deque[tuple[bytes, Future[None]]] = deque()
        self._pending = 0
        self._backlog = 0  # sealed bytes the analyser has not ingested yet
        self._closed = False
        self._fd = -1
        self._current: Path | None = None
        self._opened_at = 0.0
        # Every segment that will not change again, oldest first (kept here:
        # listing a directory of many segments on every pass would cost more).
        self._sealed: list[Path] = []
        self._current_size = 0
        self._thread: threading.Thread | None = None
        self.spans_written = 0
        self.refused = 0  # appends answered "retry later"

    # -- lifecycle -------------------------------------------------------------

    def open(self) -> Spool:
        """Repair the newest segment, start a new one and the writer thread."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            existing = segments(self.directory)
            if existing:
                repair_tail(existing[-1])
            self._sealed = existing
            self._start_segment(segment_number(existing[-1]) + 1 if existing else 1)
        except OSError as exc:
            raise ServeError(f"cannot open the spool in {self.directory}: {exc}") from exc
        self._thread = threading.Thread(target=self._write_loop, name="toolspan-spool", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Write what is pending, then stop (the open segment stays readable)."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._io:
            if self._fd < 0:
                return
            os.close(self._fd)
            self._fd = -1
            # The last segment is sealed too: the analyser's last pass reads it.
            if self._current is not None and not self._current_size:
                self._current.unlink(missing_ok=True)
            elif self._current is not None:
                self._sealed.append(self._current)
            with self._lock:
                self._backlog += self._current_size
            self._current, self._current_size = None, 0

    def _start_segment(self, number: int) -> None:
        path = self.directory / f"{SEGMENT_PREFIX}{number:010d}.jsonl"
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._current, self._current_size = path, 0
        self._opened_at = time.monotonic()
        # The new name must survive a crash too.
        _fsync_directory(self.directory)

    # -- appends ---------------------------------------------------------------

    def append(self, line: bytes, spans: int) -> Future[None]:
        """Queue one line (a newline is added); the future completes once it is
        on disk. Raises :class:`Overloaded` instead of holding more than the bounds."""
        data = line if line.endswith(b"\n") else line + b"\n"
        future: Future[None] = Future()
        with self._lock:
            refusal = self._refusal(len(data))
            if refusal:
                self.refused += 1
                raise Overloaded(refusal, self._retry_after_s)
            self._queue.append((data, future))
            self._pending += len(data)
            self.spans_written += spans
            self._lock.notify()
        return future

    def _refusal(self, size: int) -> str | None:
        if self._closed:
            return "the server is stopping"
        if self._pending and self._pending + size > self.max_pending_bytes:
            return f"more than {self.max_pending_bytes:,} bytes wait to be written"
        if self.lag_bytes() > self.max_lag_bytes:
            return f"the analyser lags {self.lag_bytes():,} bytes behind the spool"
        return None

    def lag_bytes(self) -> int:
        """Bytes on disk (sealed or not) the analyser has not ingested yet."""
        return self._backlog + self._current_size

    def set_backlog(self, sealed_bytes: int) -> None:
        """The analyser says how many sealed bytes it has still to ingest."""
        with self._lock:
            self._backlog = sealed_bytes

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._lock.wait()
                if not self._queue and self._closed:
                    return
                batch = list(self._queue)
                self._queue.clear()
            size = sum(len(data) for data, _ in batch)
            try:
                with self._io:
                    self._write(b"".join(data for data, _ in batch))
            except OSError as exc:
                error = ServeError(f"cannot write the spool: {exc}")
                for _, future in batch:
                    future.set_exception(error)
            else:
                for _, future in batch:
                    future.set_result(None)
            finally:
                with self._lock:
                    self._pending -= size

    def _write(self, data: bytes) -> None:
        """Append and fsync (with the file lock held: sealing waits for it)."""
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        self._current_size += len(data)
        if self._current_size >= self._segment_bytes:
            self._seal_locked()

    # -- sealing ---------------------------------------------------------------

    def seal(self, *, min_age_s: float = 0.0, min_bytes: int = 0) -> None:
        """Close the open segment if it holds anything (and is at least
        ``min_age_s`` old or ``min_bytes`` big) and start the next."""
        with self._io:
            if not self._current_size or self._fd < 0:
                return
            old_enough = time.monotonic() - self._opened_at >= min_age_s
            if old_enough or (min_bytes and self._current_size >= min_bytes):
                self._seal_locked()

    def _seal_locked(self) -> None:
        assert self._current is not None
        os.close(self._fd)
        self._sealed.append(self._current)
        with self._lock:
            self._backlog += self._current_size
        self._start_segment(segment_number(self._current) + 1)

    def sealed(self) -> list[Path]:
        """Every segment that will not change again, oldest first."""
        with self._io:
            return list(self._sealed)


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
