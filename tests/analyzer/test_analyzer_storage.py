"""Storage details behind the views: lines the typed read accepts but the
format forbids, materialised tables kept in step, schema versions."""

from __future__ import annotations

import gc
import itertools
import json
from pathlib import Path

import duckdb
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan

from toolspan.analyzer import Analyzer, DatabaseError

from .conftest import Recorder, gzip_copy

_SPAN_HEAD = b'{"traceId":"00112233445566778899aabbccddeeff","spanId":"0011223344556677"'

# Each line parses with the typed schema, so only the checks after the read can
# catch it; the file around it is otherwise valid and shares the batch with a
# clean file.
TYPED_BUT_CORRUPT = [
    (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + _SPAN_HEAD + b',"attributes":['
        b'{"key":"k","value":{"intValue":1}},{"key":"k","value":{"stringValue":"2"}}]}]}]}]}',
        "the key 'k' twice",
    ),
    (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + _SPAN_HEAD + b',"attributes":['
        b'{"value":{"intValue":1}}]}]}]}]}',
        "has no string key",
    ),
    (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00112233445566778899aabbccddeeff",'
        b'"spanId":"00112233"}]}]}]}',
        "spanId is not 16 hex digits",
    ),
]


def _clean_lines(tmp_path: Path, name: str, conversation: str) -> Path:
    rec = Recorder()
    with rec.conversation(conversation):
        rec.noise(conversation)
        for i in range(3):
            rec.toolspan_call("search", conversation, {"q": i}, result=i)
    return Recorder.write(tmp_path / name, rec.take(), batch=2)


@pytest.mark.parametrize(("junk", "reason"), TYPED_BUT_CORRUPT)
def test_lines_the_typed_read_accepts_are_still_checked(
    tmp_path: Path, junk: bytes, reason: str
) -> None:
    other = _clean_lines(tmp_path, "other.jsonl", "c-other")
    mixed = _clean_lines(tmp_path, "mixed.jsonl", "c-mixed")
    good = mixed.read_bytes().splitlines(keepends=True)
    mixed.write_bytes(b"".join([good[0], junk + b"\n", *good[1:]]))
    with Analyzer() as az:
        report = az.ingest([mixed, other])
        assert [(b.path, b.line) for b in report.bad_lines] == [(str(mixed), 2)]
        assert reason in report.bad_lines[0].reason
        assert report.lines == len(good) + 1 + len(other.read_bytes().splitlines())
        # Nothing valid lost, in either file; the corrupt span is not stored.
        assert az.query(
            "SELECT conversation_id, count(*) FROM tool_calls GROUP BY 1 ORDER BY 1"
        ).rows == [("c-mixed", 3), ("c-other", 3)]
        assert az.query("SELECT count(*) FROM spans WHERE span_id LIKE '00112233%'").rows == [(0,)]


def test_a_database_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE toolspan_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO toolspan_meta VALUES ('schema_version', '1')")
    con.close()
    with pytest.raises(DatabaseError, match="schema 1"):
        Analyzer(db)
    # Nothing was added to it.
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
    finally:
        con.close()
    assert tables == [("toolspan_meta",)]


def _mixed_traces() -> list[ReadableSpan]:
    """Calls whose rows depend on other spans of their trace: the conversation
    on the root span only, a framework span around toolspan's call span, attempts,
    loops and duplicate writes, so a split ingest can get any of them wrong."""
    rec = Recorder()
    with rec.conversation("c-root"):
        rec.noise()
        for _ in range(3):
            rec.genai_tool("lookup", '{"id": 7}', '"same"')
        rec.openinference_tool("search", '{"q": 1}', '"r"')
    with rec.conversation("c-keyed"):
        for _ in range(2):
            with rec.span(
                "execute_tool pay",
                scope="pydantic-ai",
                **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay"},
            ):
                rec.toolspan_call(
                    "pay", "c-keyed", {"amount": 5}, side_effect="write", key="k-1", result="ok"
                )
        rec.toolspan_call(
            "refund", "c-keyed", {"n": 1}, outcomes=("http_503", "ok"), side_effect="write"
        )
    with rec.conversation(None):
        for _ in range(3):
            rec.toolspan_call("poll", "c-poll", {"job": 1}, outcomes=("timeout",) * 2)
    return rec.take()


_MIXED = _mixed_traces()
_VIEWS = {
    "tool_calls": "SELECT * FROM tool_calls ORDER BY trace_id, span_id",
    "attempts": "SELECT * FROM attempts ORDER BY trace_id, span_id",
    "conversations": "SELECT * FROM conversations ORDER BY conversation_id",
    "findings": "SELECT * FROM findings",
    "findings_macro": "SELECT * FROM toolspan_findings(3) ORDER BY ALL",
    "findings_table": "SELECT * FROM findings ORDER BY ALL",
}


def _views(az: Analyzer) -> dict[str, list[tuple[object, ...]]]:
    return {name: az.query(sql).rows for name, sql in _VIEWS.items()}


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    order=st.permutations(range(len(_MIXED))),
    cuts=st.lists(st.integers(min_value=1, max_value=len(_MIXED) - 1), max_size=4, unique=True),
)
def test_ingesting_file_by_file_gives_the_rows_of_one_ingest(
    tmp_path_factory: pytest.TempPathFactory, order: list[int], cuts: list[int]
) -> None:
    folder = tmp_path_factory.mktemp("parts")
    shuffled = [_MIXED[i] for i in order]
    bounds = [0, *sorted(cuts), len(shuffled)]
    paths = [
        Recorder.write(folder / f"{n}.jsonl", shuffled[start:end], batch=3)
        for n, (start, end) in enumerate(itertools.pairwise(bounds))
    ]
    with Analyzer() as whole, Analyzer(folder / "parts.duckdb") as parts:
        whole.ingest(paths)
        expected = _views(whole)
        for path in paths:
            parts.ingest([path])
        assert _views(parts) == expected
    assert expected["findings_macro"] == expected["findings_table"]
    assert {(row[0], row[1], row[2]) for row in expected["findings"]} == {
        ("loop", "c-root", "lookup"),
        ("loop", "c-poll", "poll"),
        ("duplicate_write", "c-keyed", "pay"),
        ("unsafe_retry", "c-keyed", "refund"),
    }


def test_set_write_tools_recomputes_side_effects_and_findings(tmp_path: Path) -> None:
    path = Recorder.write(tmp_path / "mixed.jsonl", _MIXED)
    db = tmp_path / "t.duckdb"
    with Analyzer(db) as az:
        az.ingest([path])
        assert az.query(
            "SELECT count(*) FROM tool_calls WHERE tool = 'lookup' AND side_effect IS NULL"
        ).rows == [(3,)]
        az.set_write_tools(["look*"])
        assert az.query(
            "SELECT DISTINCT side_effect FROM tool_calls WHERE tool = 'lookup'"
        ).rows == [("write",)]
        assert ("duplicate_write", "lookup") in {(f.kind, f.tool) for f in az.findings()}
        # A named tool is a write even against its declaration; others become 'none'.
        az.set_write_tools(["poll"])
        assert az.query(
            "SELECT tool, any_value(side_effect) FROM tool_calls GROUP BY 1 ORDER BY 1"
        ).rows == [
            ("lookup", "none"),
            ("pay", "write"),
            ("poll", "write"),
            ("refund", "write"),
            ("search", "none"),
        ]
    # What another connection (the dashboard) reads is what the analyzer computed.
    con = duckdb.connect(str(db), read_only=True)
    try:
        kinds = con.execute("SELECT kind, tool FROM findings").fetchall()
    finally:
        con.close()
    assert ("duplicate_write", "lookup") not in kinds
    assert ("unsafe_retry", "poll") in kinds


def test_an_ingest_stopped_before_the_refresh_is_completed_by_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = Recorder.write(tmp_path / "mixed.jsonl", _MIXED)
    db = tmp_path / "t.duckdb"
    with Analyzer() as reference:
        reference.ingest([path])
        expected = _views(reference)
    with monkeypatch.context() as patched:
        # As if the process died after the batch committed, before the refresh.
        patched.setattr(Analyzer, "_refresh", lambda self, findings=False: None)
        with Analyzer(db) as az:
            az.ingest([path])
            assert az.query("SELECT count(*) FROM tool_calls").rows == [(0,)]
    with Analyzer(db) as az:
        assert az.ingest([path]).skipped_files == 1
        assert _views(az) == expected


def test_a_truncated_gzip_file_keeps_what_precedes_the_damage(tmp_path: Path) -> None:
    # DuckDB raises an IOException here; that is the file's fault, not a reason
    # to fail the ingest, nor to drop the lines before the damage.
    clean = _clean_lines(tmp_path, "clean.jsonl", "c-1")
    lines = clean.read_bytes().splitlines(keepends=True)
    data = gzip_copy(clean, tmp_path / "whole.gz").read_bytes()
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(data[: len(data) * 3 // 4])
    with Analyzer() as az, Analyzer() as reference:
        report = az.ingest([truncated])
        assert len(report.bad_lines) == 1
        bad = report.bad_lines[0]
        assert bad.path == str(truncated)
        assert "unreadable compressed data" in bad.reason
        # Every line before the damage is kept, and nothing after it is invented.
        kept = az.query("SELECT count(*) FROM spans").rows[0][0]
        assert 0 < kept < sum(line.count(b'"spanId"') for line in lines)
        assert bad.line - 1 <= len(lines)
        reference.ingest([clean])
        kept_rows = az.query("SELECT trace_id, span_id, name FROM spans ORDER BY ALL").rows
        all_rows = set(reference.query("SELECT trace_id, span_id, name FROM spans").rows)
        assert set(kept_rows) <= all_rows


def test_a_truncated_zstd_file_reports_the_cut_and_keeps_what_precedes_it(
    tmp_path: Path,
) -> None:
    # DuckDB reads a cut-off zstd frame as if the file simply ended there. One
    # frame per line, as an appending writer makes them; the last one is cut.
    clean = _clean_lines(tmp_path, "clean.jsonl", "c-1")
    frames = [
        zstandard.ZstdCompressor().compress(line) for line in clean.read_bytes().splitlines(True)
    ]
    assert len(frames) > 1
    whole = tmp_path / "whole.jsonl.zst"
    whole.write_bytes(b"".join(frames))
    truncated = tmp_path / "cut.jsonl.zst"
    truncated.write_bytes(b"".join(frames[:-1]) + frames[-1][: len(frames[-1]) // 2])
    with Analyzer() as az, Analyzer() as reference:
        report = az.ingest([truncated])
        assert [b.reason for b in report.bad_lines][-1].endswith("the zstd frame is cut off")
        assert all(b.path == str(truncated) for b in report.bad_lines)
        kept = set(az.query("SELECT trace_id, span_id FROM spans").rows)
        assert reference.ingest([whole]).bad_lines == ()
        everything = set(reference.query("SELECT trace_id, span_id FROM spans").rows)
        assert kept and kept < everything


def test_a_line_longer_than_the_read_buffer_is_read(tmp_path: Path) -> None:
    # One request of ~20 MB: more than the 16 MB read buffer (maximum_object_size).
    spans = [
        {
            "traceId": f"{n // 100:032x}",
            "spanId": f"{n:016x}",
            "name": "chat",
            "attributes": [{"key": "blob", "value": {"stringValue": "v" * 300}}],
        }
        for n in range(50_000)
    ]
    line = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    assert len(line) > 16 * 1024 * 1024
    path = tmp_path / "long.jsonl"
    path.write_text(line + "\n")
    with Analyzer() as az:
        report = az.ingest([path])
        assert (report.lines, report.spans, report.bad_lines) == (1, 50_000, ())


@pytest.mark.parametrize("enabled", [True, False])
def test_findings_leave_the_garbage_collector_as_they_found_it(
    tmp_path: Path, enabled: bool
) -> None:
    # findings() pauses the cyclic GC while it builds Finding objects; the
    # caller's setting must survive, whichever it was.
    recorder = Recorder()
    with recorder.conversation("c1"):
        for _ in range(3):
            recorder.toolspan_call("search", "c1", {"q": "x"}, result={"hits": 1})
    path = Recorder.write(tmp_path / "t.jsonl", recorder.spans)
    was_enabled = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        with Analyzer() as az:
            az.ingest([path])
            found = az.findings()
            assert gc.isenabled() is enabled
    finally:
        gc.enable() if was_enabled else gc.disable()
    assert [f.kind for f in found] == ["loop"]
