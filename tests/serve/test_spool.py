"""The spool: acknowledged lines are on disk, memory is bounded, a crash's
half-written line is cut off at the next start."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolspan.serve import Overloaded, Spool
from toolspan.serve._spool import repair_tail, segments


def test_pending_bytes_are_bounded(tmp_path):
    spool = Spool(tmp_path, max_pending_bytes=100).open()
    try:
        with spool._io:  # the disk is slow: nothing gets written meanwhile
            first = spool.append(b"a" * 60, 1)
            with pytest.raises(Overloaded) as refused:
                spool.append(b"b" * 60, 1)
            assert refused.value.retry_after_s > 0
            assert spool.refused == 1
        first.result(timeout=5)
        spool.append(b"c" * 60, 1).result(timeout=5)
    finally:
        spool.close()
    lines = b"".join(path.read_bytes() for path in segments(tmp_path)).splitlines()
    assert lines == [b"a" * 60, b"c" * 60]


def test_a_restart_cuts_the_half_written_line_and_starts_a_new_segment(tmp_path):
    spool = Spool(tmp_path).open()
    spool.append(b'{"resourceSpans":[]}', 0).result(timeout=5)
    # A crash in the middle of the next write (never acknowledged):
    current = spool._current
    spool._closed = True
    with current.open("ab") as handle:
        handle.write(b'{"resourceSp')
    spool._fd, fd = -1, spool._fd
    __import__("os").close(fd)
    again = Spool(tmp_path).open()
    try:
        assert current.read_bytes() == b'{"resourceSpans":[]}\n'
        assert again.sealed() == [current]
    finally:
        again.close()


@settings(max_examples=50, deadline=None)
@given(
    lines=st.lists(st.binary(min_size=1).map(lambda b: b.replace(b"\n", b"")), max_size=5),
    tail=st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")),
)
def test_repair_keeps_exactly_the_complete_lines(tmp_path_factory, lines, tail):
    path = tmp_path_factory.mktemp("repair") / "spans-0000000001.jsonl"
    complete = b"".join(line + b"\n" for line in lines)
    path.write_bytes(complete + tail)
    assert repair_tail(path) == len(tail)
    assert path.read_bytes() == complete
