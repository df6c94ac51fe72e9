"""Input files: resolving paths, opening compressed files, and the careful
line-by-line reader used only for files the fast path found corrupt."""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, cast

import orjson

from ._errors import InputError
from ._model import BadLine

TRACE_SUFFIXES = (".jsonl", ".json")
COMPRESSIONS = ("", ".gz", ".zst")
_HEX_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")
_HEX_SPAN_ID = re.compile(r"[0-9a-fA-F]{16}")


def is_trace_file(path: Path) -> bool:
    """Whether ``path`` is named like an OTLP/JSON lines file (plain, .gz or .zst)."""
    name = path.name.lower()
    return any(name.endswith(suffix + comp) for suffix in TRACE_SUFFIXES for comp in COMPRESSIONS)


def resolve(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Expand files, directories (recursively) and globs into trace files.

    A file named explicitly is read whatever its name; directories and globs
    contribute only ``*.jsonl`` / ``*.json`` files (optionally compressed).
    """
    if not paths:
        raise InputError("no input: give at least one file, directory or glob")
    found: dict[Path, None] = {}
    for raw in paths:
        for path in _expand(str(raw)):
            found[path.resolve()] = None
    if not found:
        shown = ", ".join(str(p) for p in paths)
        raise InputError(f"no trace files (*.jsonl, *.json, optionally .gz/.zst) in: {shown}")
    return sorted(found)


def _expand(raw: str) -> Iterator[Path]:
    path = Path(raw).expanduser()
    if path.is_file():
        yield path
    elif path.is_dir():
        yield from (p for p in sorted(path.rglob("*")) if p.is_file() and is_trace_file(p))
    elif glob.has_magic(raw):
        # Path.glob cannot take an absolute pattern; glob.glob can.
        matches = [Path(m) for m in sorted(glob.glob(raw, recursive=True))]  # noqa: PTH207
        for match in matches:
            if match.is_dir():
                yield from _expand(str(match))
            elif is_trace_file(match):
                yield match
    else:
        raise InputError(f"no such file or directory: {raw}")


def open_binary(path: Path) -> IO[bytes]:
    """Open a trace file for reading, decompressing .gz and .zst on the fly."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    if name.endswith(".zst"):
        import zstandard

        raw = path.open("rb")
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True))
    return path.open("rb")


def is_truncated_zstd(path: Path) -> bool:
    """True for a ``.zst`` file that ends inside a frame (its tail was cut off).

    DuckDB and zstandard's stream reader both read such a file up to the cut
    without any error, so the damage would go unreported: check the frames.
    """
    if not path.name.lower().endswith(".zst"):
        return False
    import zstandard

    decompressor = zstandard.ZstdDecompressor()
    frame = decompressor.decompressobj()
    in_frame = False
    with path.open("rb") as raw:
        while chunk := raw.read(1 << 20):
            while chunk:
                frame.decompress(chunk)  # output discarded: only the framing matters
                in_frame = True
                if not frame.eof:
                    break
                chunk, frame, in_frame = frame.unused_data, decompressor.decompressobj(), False
    return in_frame and not frame.eof


def filter_good_lines(path: Path, good_out: IO[bytes]) -> tuple[int, list[BadLine]]:
    """Copy the valid lines of ``path`` to ``good_out``; return (lines read, bad lines).

    The slow path, used only for a file the typed DuckDB read rejected: it
    applies the same shape rules as that read (objects where the schema has a
    struct, arrays where it has a list) plus the id checks, line by line.
    """
    lines = 0
    bad: list[BadLine] = []
    number = 0
    try:
        source = open_binary(path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    try:
        with source:
            for number, raw in enumerate(source, start=1):
                if not raw.strip():
                    continue
                lines += 1
                reason = line_problem(raw)
                if reason is None:
                    good_out.write(raw if raw.endswith(b"\n") else raw + b"\n")
                else:
                    bad.append(BadLine(str(path), number, reason))
    except (EOFError, OSError, _zstd_error()) as exc:
        # A truncated or damaged compressed file: everything before the damage
        # is kept, the damage itself is one corrupt line.
        lines += 1
        bad.append(BadLine(str(path), number + 1, f"unreadable compressed data: {exc}"))
        return lines, bad
    if is_truncated_zstd(path):
        lines += 1
        bad.append(
            BadLine(str(path), number + 1, "unreadable compressed data: the zstd frame is cut off")
        )
    return lines, bad


def _zstd_error() -> type[Exception]:
    import zstandard

    return zstandard.ZstdError


def line_problem(raw: bytes) -> str | None:
    """Why a line is not a usable ExportTraceServiceRequest, or None if it is."""
    try:
        request = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        # orjson counts lines and columns inside the line; the character offset is what helps.
        return f"invalid JSON: {exc.msg} at character {exc.pos + 1}"
    if not isinstance(request, dict):
        return f"expected a JSON object (ExportTraceServiceRequest), got {type(request).__name__}"
    return _request_problem(request)


def _request_problem(request: dict[str, Any]) -> str | None:
    resource_spans = request.get("resourceSpans")
    if not _is_list(resource_spans):
        return "resourceSpans is not an array"
    for i, item in enumerate(resource_spans or ()):
        where = f"resourceSpans[{i}]"
        if item is None:
            continue
        if not isinstance(item, dict):
            return f"{where} is not an object"
        resource = item.get("resource")
        if not _is_object(resource):
            return f"{where}.resource is not an object"
        problem = _attributes_problem((resource or {}).get("attributes"), f"{where}.resource")
        problem = problem or _scope_spans_problem(item.get("scopeSpans"), where)
        if problem:
            return problem
    return None


def _scope_spans_problem(scope_spans: Any, where: str) -> str | None:
    if not _is_list(scope_spans):
        return f"{where}.scopeSpans is not an array"
    for j, scope_item in enumerate(scope_spans or ()):
        here = f"{where}.scopeSpans[{j}]"
        if scope_item is None:
            continue
        if not isinstance(scope_item, dict) or not _is_object(scope_item.get("scope")):
            return f"{here} is not an object with an object scope"
        spans = scope_item.get("spans")
        if not _is_list(spans):
            return f"{here}.spans is not an array"
        for k, span in enumerate(spans or ()):
            problem = _span_problem(span, f"{here}.spans[{k}]")
            if problem:
                return problem
    return None


def _span_problem(span: Any, where: str) -> str | None:
    if span is None:
        return None
    if not isinstance(span, dict):
        return f"{where} is not an object"
    trace_id, span_id = span.get("traceId"), span.get("spanId")
    if not (isinstance(trace_id, str) and _HEX_TRACE_ID.fullmatch(trace_id)):
        return f"{where}.traceId is not 32 hex digits: {str(trace_id)[:40]!r}"
    if not (isinstance(span_id, str) and _HEX_SPAN_ID.fullmatch(span_id)):
        return f"{where}.spanId is not 16 hex digits: {str(span_id)[:40]!r}"
    if not _is_object(span.get("status")):
        return f"{where}.status is not an object"
    return _attributes_problem(span.get("attributes"), where)


def _attributes_problem(attributes: Any, where: str) -> str | None:
    if not _is_list(attributes):
        return f"{where}.attributes is not an array"
    seen: set[str] = set()
    for n, attribute in enumerate(attributes or ()):
        key = attribute.get("key") if isinstance(attribute, dict) else None
        if not isinstance(key, str):
            return f"{where}.attributes[{n}] has no string key"
        if key in seen:
            return f"{where}.attributes has the key {key!r} twice"
        seen.add(key)
        if not _is_object(attribute.get("value")):
            return f"{where}.attributes[{n}].value is not an object"
    return None


def _is_list(value: Any) -> bool:
    return value is None or isinstance(value, list)


def _is_object(value: Any) -> bool:
    return value is None or isinstance(value, dict)
