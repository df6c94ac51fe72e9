"""``--follow DIR``: read what an OpenTelemetry Collector's file exporter writes.

Every OTLP/JSON lines file in DIR (plain, ``.gz``, ``.zst``) is read as it
grows, only up to its last complete line (a half-written line waits for its
end), and each line goes through the receiver's own checks into the spool.

A file is known by its first line, not its name: the exporter's rotation
renames the file it writes, and may compress it, so a rotated ``.gz`` or
``.zst`` copy has the same first line as the file already read, and only
what lies past the position reached in it (in decompressed bytes) is new.
Positions are saved after the lines are durably in the spool, in
``DIR/follow.state``: after a restart the follower resumes there, and every
span is counted once (the analyzer also keeps each span id once).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import IO

import orjson

from .._errors import BadRequest, Overloaded
from ..analyzer._inputs import is_trace_file, open_binary
from ._otlp import from_json
from ._spool import Spool

__all__ = ["Follower"]

STATE_FILE = "follow.state"
_READ_BYTES = 8 * 1024 * 1024
_FIRST_LINE_MAX = 64 * 1024 * 1024


class Follower:
    """A thread that copies the complete new lines of DIR's files to the spool."""

    def __init__(
        self,
        follow: Path,
        spool: Spool,
        state_dir: Path,
        *,
        interval_s: float = 0.5,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self._follow = follow
        self._spool = spool
        self._state_path = state_dir / STATE_FILE
        self._interval_s = interval_s
        self._log = log or _stderr
        self._positions: dict[str, int] = self._load()
        # Files read to their end, by (size, mtime): not opened again until they change.
        self._finished: dict[Path, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._scanning = threading.Lock()  # one pass at a time reads and saves positions
        self._thread: threading.Thread | None = None

    def start(self) -> Follower:
        self._thread = threading.Thread(target=self._run, name="toolspan-follow", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan()
            except OSError as exc:
                self._log(f"following {self._follow}: {exc}")
            self._stop.wait(self._interval_s)

    def scan(self) -> int:
        """One pass over the directory; returns the spans sent to the spool."""
        if not self._follow.is_dir():
            return 0
        files = [p for p in self._follow.rglob("*") if p.is_file() and is_trace_file(p)]
        files.sort(key=lambda p: (_mtime(p), p.name))
        spans = 0
        with self._scanning:
            for path in files:
                if self._stop.is_set():
                    break
                try:
                    spans += self._read(path)
                except Overloaded:
                    raise
                except Exception as exc:
                    # A damaged file (cut-off compression, unreadable) is reported
                    # once, and read again when it changes; the other files go on.
                    self._log(f"following {path}: {type(exc).__name__}: {exc}")
                    with contextlib.suppress(OSError):
                        stat = path.stat()
                        self._finished[path] = (stat.st_size, stat.st_mtime_ns)
        return spans

    def _read(self, path: Path) -> int:
        try:
            stat = path.stat()
        except FileNotFoundError:
            return 0  # rotated away meanwhile: read under its new name
        signature = (stat.st_size, stat.st_mtime_ns)
        if self._finished.get(path) == signature:
            return 0
        key = _first_line_key(path)
        if key is None:
            return 0  # not even one complete line yet
        position = self._positions.get(key, 0)
        spans, carry = 0, b""
        with _open_at(path, position) as source:
            while True:
                read = _read_block(source)
                block = carry + read
                cut = block.rfind(b"\n") + 1
                if cut:
                    spans += self._send(path, block[:cut], position)
                    position += cut
                    self._positions[key] = position
                    self._save()
                # What follows the last newline is a line still being written.
                carry = block[cut:]
                if len(read) < _READ_BYTES:
                    break
        self._finished[path] = signature
        return spans

    def _send(self, path: Path, lines: bytes, offset: int) -> int:
        """Each line, checked, into the spool; waits until they are on disk."""
        futures: list[Future[None]] = []
        spans = 0
        for line in lines.splitlines():
            if not line.strip():
                continue
            try:
                converted = from_json(line)
            except BadRequest as exc:
                self._log(f"{path} (byte {offset}): skipped: {exc}")
                continue
            if converted.error:
                self._log(f"{path} (byte {offset}): {converted.error}")
            if converted.line is not None:
                futures.append(self._spool_line(converted.line, converted.spans))
                spans += converted.spans
        for future in futures:
            future.result()
        return spans

    def _spool_line(self, line: bytes, spans: int) -> Future[None]:
        # The spool may be full: the follower, unlike a client, waits its turn.
        while True:
            try:
                return self._spool.append(line, spans)
            except Overloaded as exc:
                if self._stop.wait(exc.retry_after_s):
                    raise

    def _load(self) -> dict[str, int]:
        try:
            value = orjson.loads(self._state_path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        return {str(k): int(v) for k, v in value.items()} if isinstance(value, dict) else {}

    def _save(self) -> None:
        partial = self._state_path.with_name(STATE_FILE + ".partial")
        with partial.open("wb") as out:
            out.write(orjson.dumps(self._positions))
            out.flush()
            os.fsync(out.fileno())
        partial.replace(self._state_path)


def _compressed(path: Path) -> bool:
    return path.name.lower().endswith((".gz", ".zst"))


def _first_line_key(path: Path) -> str | None:
    """What identifies a file across renames and compression: its first line."""
    with open_binary(path) as source:
        try:
            first = source.readline(_FIRST_LINE_MAX)
        except (EOFError, OSError):
            return None
    if not first.endswith(b"\n"):
        return None
    return hashlib.sha256(first).hexdigest()[:32]


def _open_at(path: Path, position: int) -> IO[bytes]:
    """``path`` (decompressed) from byte ``position`` on."""
    source = open_binary(path)
    if not _compressed(path):
        source.seek(position)
        return source
    left = position
    while left:
        skipped = len(_read_block(source, min(left, _READ_BYTES)))
        if not skipped:
            break
        left -= skipped
    return source


def _read_block(source: IO[bytes], size: int = _READ_BYTES) -> bytes:
    """Up to ``size`` bytes; what was readable when compressed data is cut off."""
    chunks: list[bytes] = []
    got = 0
    try:
        while got < size:
            chunk = source.read(size - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except (EOFError, OSError, ValueError):
        pass  # a compressed file still being written: its complete lines so far
    except Exception as exc:  # zstandard.ZstdError, imported lazily
        if type(exc).__name__ != "ZstdError":
            raise
    return b"".join(chunks)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _stderr(message: str) -> None:
    print(f"toolspan serve: {message}", file=sys.stderr, flush=True)
