"""``--follow DIR``: files the official OTLP/JSON file exporter writes, while
they grow and rotate (renamed, gzipped, zstd-compressed): each span once."""

from __future__ import annotations

import gzip

import zstandard
from opentelemetry.exporter.otlp.json.file import FileSpanExporter

from .conftest import send_writes, summary, wait_for


def _spooled(server):
    return server.spool.spans_written


def test_follow_new_growing_and_rotated_files(serve, tmp_path):
    follow = tmp_path / "collector"
    follow.mkdir()
    active = follow / "traces.jsonl"
    send_writes(FileSpanExporter(path=active), "conv-follow-1")
    first = active.read_bytes()
    per_conversation = first.count(b"\n")
    server = serve(follow=follow)
    wait_for(lambda: summary(server)["summary"]["spans"] == per_conversation)

    # A line half written: it waits for its end, and is never read half.
    line = first.splitlines(keepends=True)[0].replace(b"conv-follow-1", b"conv-follow-2")
    line = line.replace(
        line[line.index(b'"spanId":"') + 10 : line.index(b'"spanId":"') + 26], b"f" * 16
    )
    with active.open("ab") as handle:
        handle.write(line[:40])
    server._follower.scan()
    assert _spooled(server) == per_conversation
    with active.open("ab") as handle:
        handle.write(line[40:])
    wait_for(lambda: summary(server)["summary"]["spans"] == per_conversation + 1)

    # Rotation: renamed, then compressed copies appear; a new file starts.
    rotated = follow / "traces-2026-12-02T07-00-00.000.jsonl"
    active.rename(rotated)
    content = rotated.read_bytes()
    (follow / "traces-2026-12-02T07-00-00.000.jsonl.gz").write_bytes(gzip.compress(content))
    (follow / "traces-2026-12-02T07-00-00.000.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(content)
    )
    send_writes(FileSpanExporter(path=active), "conv-follow-3")
    total = per_conversation * 2 + 1
    wait_for(lambda: summary(server)["summary"]["spans"] == total)
    server._follower.scan()
    # Each span went to the spool once: the rotated copies added nothing.
    assert _spooled(server) == total
    assert summary(server)["summary"]["bad_lines"] == 0


def test_follow_resumes_after_a_restart(serve, tmp_path):
    follow = tmp_path / "collector"
    follow.mkdir()
    send_writes(FileSpanExporter(path=follow / "traces.json"), "conv-resume-1")
    spans = (follow / "traces.json").read_bytes().count(b"\n")
    server = serve(follow=follow)
    wait_for(lambda: summary(server)["summary"]["spans"] == spans)
    server.stop()
    send_writes(FileSpanExporter(path=follow / "traces.json"), "conv-resume-2")
    again = serve(follow=follow)
    wait_for(lambda: summary(again)["summary"]["spans"] == 2 * spans)
    again._follower.scan()
    assert _spooled(again) == spans  # only the new lines went to the spool


def test_a_damaged_file_is_reported_and_the_others_are_read(serve, tmp_path):
    follow = tmp_path / "collector"
    follow.mkdir()
    (follow / "broken.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00 not really gzip")
    send_writes(FileSpanExporter(path=follow / "traces.jsonl"), "conv-damaged")
    spans = (follow / "traces.jsonl").read_bytes().count(b"\n")
    server = serve(follow=follow)
    wait_for(lambda: summary(server)["summary"]["spans"] == spans)
    assert server._follower._thread.is_alive()
