"""Input files: resolving paths, batching them ready for the typed read
(:func:`batches`: truncation checks, bundles of small files), opening
compressed files, and the careful line-by-line reader used only for files the
fast path found corrupt."""

from __future__ import annotations

import glob
import gzip
import io
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple, cast

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


# Small plain files are bundled (Analyzer._read_into_stage): up to this size
# each, and this many files or bytes per bundle (a bad file sends its whole
# bundle to the file-by-file read).
BUNDLE_FILE_BYTES = 256 * 1024
BUNDLE_FILES = 1000
BUNDLE_BYTES = 16 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"


# Bundling small files pays from about this many on.
MIN_BUNDLE_FILES = 16


class Batch(NamedTuple):
    """A batch of files as the analyzer reads it, made ready here so that the
    analyzer only reads (one way: files in, rows out). ``files`` are every file
    of the batch (the analyzer records each), ``whole`` those the typed read
    opens as they are, ``bundles`` (bundle file, files in it) small files copied
    into one file each, ``cut_off`` ``.zst`` files whose tail is cut off (DuckDB
    would read them "fine" up to the cut: the line-by-line reader's), and
    ``scratch`` a private directory that lives until the next batch is asked for."""

    files: list[Path]
    whole: list[Path]
    bundles: list[tuple[Path, list[Path]]]
    cut_off: list[Path]
    scratch: Path


def batches(files: list[Path], *, batch_bytes: int) -> Iterator[Batch]:
    """``files`` in batches of about ``batch_bytes`` on disk (so that the stage,
    and with it memory, stays bounded whatever the input), each made ready."""
    for group in groups(files, max_bytes=batch_bytes):
        with tempfile.TemporaryDirectory(prefix="toolspan-") as scratch:
            yield prepare(group, Path(scratch))


def prepare(files: list[Path], scratch: Path) -> Batch:
    """One batch made ready: cut-off ``.zst`` files set apart, small plain
    files bundled (the typed read costs about a millisecond per file it opens)
    once there are enough of them; a file that cannot be bundled is read whole."""
    cut_off = [path for path in files if is_truncated_zstd(path)]
    readable = [path for path in files if path not in set(cut_off)]
    small = [path for path in readable if is_bundleable(path)]
    if len(small) < MIN_BUNDLE_FILES:
        return Batch(files, readable, [], cut_off, scratch)
    bundled = set(small)
    whole = [path for path in readable if path not in bundled]
    bundles = []
    for number, group in enumerate(groups(small, BUNDLE_BYTES, BUNDLE_FILES)):
        bundle = scratch / f"bundle-{number}.jsonl"
        skipped = write_bundle(group, bundle)
        whole += [path for path in group if path in skipped]
        bundles.append((bundle, [path for path in group if path not in skipped]))
    return Batch(files, whole, bundles, cut_off, scratch)


def is_bundleable(path: Path) -> bool:
    """A small uncompressed file, worth copying into a bundle."""
    name = path.name.lower()
    if name.endswith((".gz", ".zst")):
        return False
    try:
        return path.stat().st_size <= BUNDLE_FILE_BYTES
    except OSError:
        return False


def groups(files: list[Path], max_bytes: int, max_files: int | None = None) -> Iterator[list[Path]]:
    """``files`` in order, in groups of at most ``max_bytes`` bytes (and ``max_files``
    files); a file larger than ``max_bytes`` is a group of its own."""
    group: list[Path] = []
    size = 0
    for path in files:
        file_size = path.stat().st_size
        full = max_files is not None and len(group) >= max_files
        if group and (full or size + file_size > max_bytes):
            yield group
            group, size = [], 0
        group.append(path)
        size += file_size
    if group:
        yield group


def write_bundle(files: list[Path], bundle: Path) -> set[Path]:
    """Copy ``files`` into one file, each line tagged ``"toolspanFile": n`` (the
    file's 1-based position among those copied); returns the files left out
    (a line that is no JSON object, or unreadable): they are read on their own."""
    left_out: set[Path] = set()
    position = 0
    with bundle.open("wb") as out:
        for path in files:
            try:
                data = path.read_bytes()
            except OSError:
                left_out.add(path)
                continue
            tagged = _tagged_lines(data, position + 1)
            if tagged is None:
                left_out.add(path)
                continue
            position += 1
            out.write(tagged)
    return left_out


def _tagged_lines(data: bytes, position: int) -> bytes | None:
    tag = b'{"toolspanFile":%d' % position
    lines = []
    for line in data.removeprefix(_BOM).split(b"\n"):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith(b"{"):
            return None
        rest = stripped[1:]
        lines.append(tag + (rest if rest.lstrip().startswith(b"}") else b"," + rest))
    return b"\n".join(lines) + b"\n" if lines else b""


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


# The longest line read at all: the line checker holds a line in memory, and
# the typed read needs a buffer of about its size. Longer lines are reported.
MAX_LINE_BYTES = 256 * 1024 * 1024
# A longer line is kept as several requests of about this size at most, each
# with its resource and scope: the typed read holds a line whole, with a
# buffer of its size per thread, and one line of 60,000 spans (118 MB) did not
# fit the default 512MB memory limit. Spans count, not the lines they came in.
SPLIT_LINE_BYTES = 8 * 1024 * 1024
_INT64_MAX = 2**63 - 1


class SlowRead(NamedTuple):
    """What the line-by-line reader kept and found in one file.

    ``kept`` are (line number, offset, length) of the lines written to the good
    copy, ``longest`` the length of the longest of them; ``unchecked`` are lines
    too deeply nested for the line checker (the typed read decides about them).
    """

    lines: int
    bad: list[BadLine]
    kept: list[tuple[int, int, int]]
    longest: int
    unchecked: list[tuple[int, bytes]]


class _Checked(NamedTuple):
    # What to keep of the line: itself, or without its bad spans; a long line
    # as several (split_request). Empty: nothing.
    keep: list[bytes]
    problems: list[str]
    unchecked: bool = False


def filter_good_lines(path: Path, good_out: IO[bytes]) -> SlowRead:
    """Copy the valid lines of ``path`` (without their invalid spans) to ``good_out``.

    The slow path, used only for a file the typed DuckDB read rejected or found
    suspect: it applies the same shape rules as that read (objects where the
    schema has a struct, arrays where it has a list) plus the id, attribute key
    and time checks, span by span, so that one bad span costs only itself.
    """
    lines, bad, kept, longest, unchecked = 0, [], [], 0, []
    number, offset = 0, 0
    try:
        source = open_binary(path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    try:
        with source:
            for number, raw in _bounded_lines(source):
                if raw is None:
                    lines += 1
                    bad.append(BadLine(str(path), number, _too_long()))
                    continue
                if not raw.strip():
                    continue
                lines += 1
                checked = check_line(raw)
                bad.extend(BadLine(str(path), number, problem) for problem in checked.problems)
                if checked.unchecked:
                    unchecked.append((number, raw))
                for piece in checked.keep:
                    line = piece if piece.endswith(b"\n") else piece + b"\n"
                    good_out.write(line)
                    kept.append((number, offset, len(line)))
                    offset += len(line)
                    longest = max(longest, len(line))
    except (EOFError, OSError, _zstd_error()) as exc:
        # A truncated or damaged compressed file: everything before the damage
        # is kept, the damage itself is one corrupt line.
        lines += 1
        bad.append(BadLine(str(path), number + 1, f"unreadable compressed data: {exc}"))
        return SlowRead(lines, bad, kept, longest, unchecked)
    if is_truncated_zstd(path):
        lines += 1
        bad.append(
            BadLine(str(path), number + 1, "unreadable compressed data: the zstd frame is cut off")
        )
    return SlowRead(lines, bad, kept, longest, unchecked)


def split_copy(
    copy: Path, kept: list[tuple[int, int, int]]
) -> list[tuple[Path, list[tuple[int, int, int]]]]:
    """``copy`` cut into two files of half its lines each, with their (line
    number, offset, length) in the new files."""
    middle = len(kept) // 2
    halves = []
    with copy.open("rb") as source:
        for index, part in enumerate((kept[:middle], kept[middle:])):
            target = copy.with_name(f"{copy.stem}.{index}.jsonl")
            moved, offset = [], 0
            with target.open("wb") as out:
                source.seek(part[0][1])
                for number, _, length in part:
                    out.write(source.read(length))
                    moved.append((number, offset, length))
                    offset += length
            halves.append((target, moved))
    return halves


def _too_long() -> str:
    return f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MB: not read"


def _bounded_lines(source: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line) of ``source``; None for a line over MAX_LINE_BYTES,
    which is skipped without ever being held whole in memory."""
    number = 0
    while raw := source.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n"):
            yield number, raw
            continue
        while (rest := source.readline(1 << 20)) and not rest.endswith(b"\n"):
            pass
        yield number, None


def _zstd_error() -> type[Exception]:
    import zstandard

    return zstandard.ZstdError


def line_problem(raw: bytes) -> str | None:
    """Why a line holds an unusable span or is no ExportTraceServiceRequest, or None."""
    problems = check_line(raw).problems
    return problems[0] if problems else None


def check_line(raw: bytes) -> _Checked:
    """What to keep of one line, and every problem in it (one per bad span)."""
    try:
        request = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("depth limit"):
            # Valid JSON can nest deeper than orjson's limit; the typed read
            # has none, and the stage checks its spans (Analyzer._stage_unchecked).
            return _Checked([], [], unchecked=True)
        # orjson counts lines and columns inside the line; the character offset is what helps.
        return _Checked([], [f"invalid JSON: {exc.msg} at character {exc.pos + 1}"])
    usable, problems = check_request(request)
    if not usable:
        return _Checked([], problems)
    if len(raw) > SPLIT_LINE_BYTES:
        return _Checked(split_request(request, len(raw)), problems)
    return _Checked([_dumps(request)] if problems else [raw], problems)


def split_request(request: dict[str, Any], size: int) -> list[bytes]:
    """A checked request of about ``size`` bytes as requests of at most about
    SPLIT_LINE_BYTES each (a single span larger than that alone in one), every
    span in exactly one of them, under its own resource and scope."""
    pieces: list[bytes] = []
    for resource in request.get("resourceSpans") or ():
        for scope in (resource or {}).get("scopeSpans") or ():
            spans = (scope or {}).get("spans") or []
            # A first cut by the line's average span size; _dump_piece halves
            # what still comes out too long.
            step = max(1, len(spans) * SPLIT_LINE_BYTES // max(size, 1))
            for start in range(0, len(spans), step):
                _dump_piece(request, resource, scope, spans[start : start + step], pieces)
    return pieces


def _dump_piece(
    request: dict[str, Any],
    resource: dict[str, Any],
    scope: dict[str, Any],
    spans: list[Any],
    pieces: list[bytes],
) -> None:
    piece = {**request, "resourceSpans": [{**resource, "scopeSpans": [{**scope, "spans": spans}]}]}
    line = _dumps(piece)
    if len(line) <= SPLIT_LINE_BYTES or len(spans) == 1:
        pieces.append(line)
        return
    middle = len(spans) // 2
    _dump_piece(request, resource, scope, spans[:middle], pieces)
    _dump_piece(request, resource, scope, spans[middle:], pieces)


def normalised(raw: bytes) -> bytes | None:
    """The line re-serialised (a repeated key keeps its last value, as in
    JavaScript and most JSON parsers), or None if it cannot be."""
    try:
        return _dumps(orjson.loads(raw))
    except (orjson.JSONDecodeError, ValueError):
        return None


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # nested deeper than orjson writes (254 levels)
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
        except RecursionError as exc:
            raise ValueError("too deeply nested to re-serialise") from exc


def _request_problem(request: dict[str, Any]) -> str | None:
    resource_spans = request.get("resourceSpans")
    if not _is_list(resource_spans):
        return "resourceSpans is not an array"
    return None


def _drop_bad_parts(request: dict[str, Any]) -> list[str]:
    """Remove the resources, scopes and spans that break the rules from the
    parsed request, in place; one problem per part removed."""
    problems: list[str] = []
    resources = request.get("resourceSpans") or []
    kept_resources = []
    for i, item in enumerate(resources):
        where = f"resourceSpans[{i}]"
        problem = _resource_problem(item, where)
        if problem:
            problems.append(f"{problem} ({_count_spans(item)} span(s) in it skipped)")
            continue
        if item is not None:
            problems.extend(_drop_bad_scopes(item, where))
        kept_resources.append(item)
    if problems:
        request["resourceSpans"] = kept_resources
    return problems


def _resource_problem(item: Any, where: str) -> str | None:
    if item is None:
        return None
    if not isinstance(item, dict):
        return f"{where} is not an object"
    resource = item.get("resource")
    if not _is_object(resource):
        return f"{where}.resource is not an object"
    problem = _attributes_problem((resource or {}).get("attributes"), f"{where}.resource")
    if problem:
        return problem
    if not _is_list(item.get("scopeSpans")):
        return f"{where}.scopeSpans is not an array"
    return None


def _drop_bad_scopes(item: dict[str, Any], where: str) -> list[str]:
    problems: list[str] = []
    kept_scopes: list[Any] = []
    for j, scope_item in enumerate(item.get("scopeSpans") or []):
        here = f"{where}.scopeSpans[{j}]"
        if scope_item is None:
            kept_scopes.append(scope_item)
            continue
        if not isinstance(scope_item, dict) or not _is_object(scope_item.get("scope")):
            problems.append(f"{here} is not an object with an object scope")
            continue
        spans = scope_item.get("spans")
        if not _is_list(spans):
            problems.append(f"{here}.spans is not an array")
            continue
        kept_spans = []
        for k, span in enumerate(spans or []):
            problem = _span_problem(span, f"{here}.spans[{k}]")
            if problem:
                problems.append(problem)
            else:
                kept_spans.append(span)
        if spans and len(kept_spans) < len(spans):
            scope_item["spans"] = kept_spans
        kept_scopes.append(scope_item)
    if problems:
        item["scopeSpans"] = kept_scopes
    return problems


def _count_spans(item: Any) -> int:
    if not isinstance(item, dict) or not isinstance(item.get("scopeSpans"), list):
        return 0
    return sum(
        len(scope["spans"])
        for scope in item["scopeSpans"]
        if isinstance(scope, dict) and isinstance(scope.get("spans"), list)
    )


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
    for field in ("startTimeUnixNano", "endTimeUnixNano"):
        if not _is_time(span.get(field)):
            return (
                f"{where}.{field} is not a time in nanoseconds since 1970 "
                f"(0 to 2^63-1): {str(span.get(field))[:40]!r}"
            )
    return _attributes_problem(span.get("attributes"), where)


def _is_time(value: Any) -> bool:
    """Whether a span time reads as DuckDB's TRY_CAST(... AS BIGINT) >= 0 does
    (read_batch.sql, times_ok); absent and empty count as unknown, not bad."""
    if value is None or value == "":
        return True
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return False
    number: float | int
    if isinstance(value, str):
        try:
            number = int(value)
        except ValueError:
            try:
                number = int(value.strip(), 0)
            except ValueError:
                try:
                    number = float(value)
                except ValueError:
                    return False
    else:
        number = value
    return 0 <= number <= _INT64_MAX


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


def check_request(request: Any) -> tuple[bool, list[str]]:
    """Check one parsed ExportTraceServiceRequest (``toolspan serve`` receives
    them) and remove its bad parts in place, by the rules of :func:`check_line`:
    (whether anything of it is usable, one problem per part removed)."""
    if not isinstance(request, dict):
        kind = type(request).__name__
        return False, [f"expected a JSON object (ExportTraceServiceRequest), got {kind}"]
    problem = _request_problem(request)
    if problem:
        return False, [problem]
    return True, _drop_bad_parts(request)
