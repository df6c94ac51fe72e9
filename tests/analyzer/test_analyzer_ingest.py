"""Ingest: inputs, corrupt lines, deduplication, persistence, errors."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolspan.analyzer import (
    Analyzer,
    CorruptInputError,
    DatabaseError,
    InputError,
    QueryError,
    _analyzer,
)

from .conftest import Recorder, canonical, gzip_copy, sha, span_hex, zstd_copy


def _record_calls(rec: Recorder, n: int = 6) -> list[str]:
    ids = []
    with rec.conversation("c1"):
        rec.noise("c1")
        for i in range(n):
            ids.append(span_hex(rec.toolspan_call("search", "c1", {"q": i}, result=i)))
    return ids


def _good_lines(tmp_path: Path) -> list[bytes]:
    rec = Recorder()
    _record_calls(rec)
    path = Recorder.write(tmp_path / "clean.jsonl", rec.take(), batch=2)
    return path.read_bytes().splitlines(keepends=True)


CORRUPT = [
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab', "invalid JSON"),
    (b"\x00\xff\xfe binary junk \x81\n", "invalid JSON"),
    (b'{"resourceSpans": "not a list"}\n', "resourceSpans is not an array"),
    (b"[1, 2, 3]\n", "expected a JSON object"),
    (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","spanId":"0011223344556677"}]}]}]}\n',
        "traceId is not 32 hex digits",
    ),
    (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00112233445566778899aabbccddeeff",'
        b'"spanId":"0011223344556677","attributes":[{"key":"k","value":"flat"}]}]}]}]}\n',
        "value is not an object",
    ),
    (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00112233445566778899aabbccddeeff",'
        b'"spanId":"0011223344556677","attributes":[{"key":"k","value":{"intValue":1}},'
        b'{"key":"k","value":{"intValue":2}}]}]}]}]}\n',
        "twice",
    ),
]


def test_corrupt_lines_are_reported_and_everything_else_is_kept(tmp_path: Path) -> None:
    good = _good_lines(tmp_path)
    mixed = tmp_path / "mixed.jsonl"
    lines: list[bytes] = []
    expected_bad: list[tuple[int, str]] = []
    for n, line in enumerate(good):
        lines.append(line)
        if n < len(CORRUPT):
            junk, reason = CORRUPT[n]
            lines.append(b"\n")  # blank lines are neither data nor corrupt
            lines.append(junk if junk.endswith(b"\n") else junk + b"\n")
            expected_bad.append((len(lines), reason))
    mixed.write_bytes(b"".join(lines))
    with Analyzer() as clean_az, Analyzer() as az:
        clean_az.ingest([tmp_path / "clean.jsonl"])
        report = az.ingest([mixed])
        assert [(b.line, b.path) for b in report.bad_lines] == [
            (line, str(mixed)) for line, _ in expected_bad
        ]
        for bad, (_, reason) in zip(report.bad_lines, expected_bad, strict=True):
            assert reason in bad.reason
        assert report.lines == len(good) + len(CORRUPT)
        # Nothing valid is lost: the same spans as the clean file.
        key = "SELECT trace_id, span_id, name, attributes FROM spans ORDER BY 1, 2"
        assert az.query(key).rows == clean_az.query(key).rows
        assert az.summary()["bad_lines"] == len(CORRUPT)


def test_strict_mode_fails_and_adds_nothing(tmp_path: Path) -> None:
    good = _good_lines(tmp_path)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(good[:2]) + b"{oops\n" + b"".join(good[2:]))
    with Analyzer() as az:
        with pytest.raises(CorruptInputError, match=r"broken.jsonl:3: invalid JSON"):
            az.ingest([broken], strict=True)
        assert az.query("SELECT count(*) FROM spans").rows == [(0,)]
        # Not remembered as ingested: a lenient run reads it.
        assert az.ingest([broken]).files == 1


def test_same_file_or_span_twice_adds_nothing(tmp_path: Path) -> None:
    _good_lines(tmp_path)
    clean = tmp_path / "clean.jsonl"
    copies = [
        gzip_copy(clean, tmp_path / "copy.jsonl.gz"),
        zstd_copy(clean, tmp_path / "c.json.zst"),
    ]
    with Analyzer() as az:
        first = az.ingest([clean])
        assert (first.files, first.spans) == (1, 15)  # 6 calls x 2 spans, root, chat, HTTP
        again = az.ingest([clean])
        assert (again.files, again.skipped_files, again.spans) == (0, 1, 0)
        compressed = az.ingest(copies)
        assert (compressed.files, compressed.spans, compressed.lines) == (2, 0, 2 * first.lines)
        assert az.query("SELECT count(*) FROM tool_calls").rows == [(6,)]


def test_a_conversation_split_across_files_and_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorder()
    ids = _record_calls(rec, n=3)
    spans = rec.take()
    # Out of order, over three files: children before parents, the root last.
    Recorder.write(tmp_path / "1.jsonl", spans[::-1][:5], batch=1)
    Recorder.write(tmp_path / "2.jsonl", spans[::-1][5:9], batch=2)
    Recorder.write(tmp_path / "3.jsonl", spans[::-1][9:], batch=3)
    monkeypatch.setattr(_analyzer, "BATCH_BYTES", 1)  # one file per batch
    messages: list[str] = []
    with Analyzer() as az:
        report = az.ingest([tmp_path / "*.jsonl"], progress=messages.append)
        assert report.spans == len(spans)
        loops = [f for f in az.findings() if f.kind == "loop"]
    assert loops == []  # three calls with different arguments
    assert sum("reading 1 file(s)" in m for m in messages) == 3
    with Analyzer() as az:
        az.ingest([tmp_path])
        calls = az.query(
            "SELECT span_id, conversation_id, attempts FROM tool_calls ORDER BY start_time"
        ).rows
    assert calls == [(i, "c1", 1) for i in ids]


def test_database_file_persists_and_opens_read_only(tmp_path: Path) -> None:
    _good_lines(tmp_path)
    db = tmp_path / "t.duckdb"
    with Analyzer(db) as az:
        az.ingest([tmp_path / "clean.jsonl"])
        az.set_write_tools(["search"])
    with Analyzer(db, read_only=True) as az:
        # The write-tools setting persists, and naming a tool overrides its spans.
        assert az.query("SELECT count(*), any_value(side_effect) FROM tool_calls").rows == [
            (6, "write")
        ]
        assert az.query("SELECT count(*) FROM conversations").rows == [(1,)]
        with pytest.raises(DatabaseError, match="read-only"):
            az.ingest([tmp_path / "clean.jsonl"])
    # A separate plain DuckDB connection (as the dashboard uses) sees the views.
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM findings").fetchone() == (0,)
    finally:
        con.close()
    with Analyzer(db) as az:
        assert az.ingest([tmp_path / "clean.jsonl"]).skipped_files == 1


def test_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with Analyzer() as az:
        with pytest.raises(InputError, match="no such file"):
            az.ingest([tmp_path / "missing.jsonl"])
        with pytest.raises(InputError, match="no trace files"):
            az.ingest([tmp_path])
        with pytest.raises(InputError, match="no input"):
            az.ingest([])
        with pytest.raises(QueryError, match="nope") as caught:
            az.query("SELECT nope FROM spans")
        assert isinstance(caught.value.__cause__, duckdb.Error)
        with pytest.raises(ValueError):
            az.findings(min_repeats=1)
    with pytest.raises(DatabaseError):
        Analyzer(None, read_only=True)


def test_spans_view_types(tmp_path: Path) -> None:
    _good_lines(tmp_path)
    with Analyzer() as az:
        az.ingest([tmp_path / "clean.jsonl"])
        row = az.query(
            "SELECT kind, status_code, service_name, scope_name, duration_ms > 0,"
            " attributes['gen_ai.tool.name'], typeof(start_time), typeof(attributes)"
            " FROM spans WHERE name = 'execute_tool search' LIMIT 1"
        ).rows[0]
    assert row == (
        "INTERNAL",
        "OK",
        "agent",
        "toolspan",
        True,
        "search",
        "TIMESTAMP",
        "MAP(VARCHAR, VARCHAR)",
    )


_RECORDED = Recorder()
with _RECORDED.conversation("p"):
    for _i in range(4):
        _RECORDED.toolspan_call("poll", "p", {"job": 1}, result="same")
    _RECORDED.genai_tool("other", '{"b": 1, "a": [1, {"y": 2, "x": 1}]}', "ok", conversation="p")
    _RECORDED.noise("p")
_SPANS = _RECORDED.take()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    order=st.permutations(range(len(_SPANS))),
    cuts=st.lists(st.integers(min_value=1, max_value=len(_SPANS) - 1), max_size=4, unique=True),
    batch=st.integers(min_value=1, max_value=6),
)
def test_files_lines_and_order_do_not_change_the_analysis(
    tmp_path_factory: pytest.TempPathFactory, order: list[int], cuts: list[int], batch: int
) -> None:
    folder = tmp_path_factory.mktemp("split")
    shuffled = [_SPANS[i] for i in order]
    bounds = [0, *sorted(cuts), len(shuffled)]
    for n, (start, end) in enumerate(itertools.pairwise(bounds)):
        Recorder.write(folder / f"{n}.jsonl", shuffled[start:end], batch=batch)
    with Analyzer() as az:
        report = az.ingest([folder])
        findings = az.findings()
        calls = az.query("SELECT count(*), count(DISTINCT args_fingerprint) FROM tool_calls").rows
    assert report.spans == len(_SPANS)
    assert calls == [(5, 2)]
    assert [(f.kind, f.tool, f.count) for f in findings] == [("loop", "poll", 4)]
    assert json.loads(findings[0].detail["arguments"]) == {"job": 1}


def test_spans_without_hashes_are_fingerprinted_in_a_later_ingest(tmp_path: Path) -> None:
    # toolspan's spans carry their hashes: the canonical JSON function is then
    # never needed (nor registered), also for a result captured beside its hash
    # (capture_results). A later ingest of spans without hashes must still
    # fingerprint them, ignoring key order and whitespace.
    rec = Recorder()
    with rec.conversation("c1"):
        rec.toolspan_call("search", "c1", {"q": "a", "n": 1}, result={"hits": 1})
        with rec.span(
            "execute_tool fetch",
            scope="toolspan",
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "fetch",
                "gen_ai.tool.call.arguments": canonical({"id": 2}),
                "toolspan.args.hash": sha({"id": 2}),
                "toolspan.status": "succeeded",
                "toolspan.attempts": 1,
                "gen_ai.tool.call.result": '{"b": 1, "a": 2}',
                "toolspan.result.hash": sha({"a": 2, "b": 1}),
            },
        ):
            pass
    hashed = Recorder.write(tmp_path / "hashed.jsonl", rec.take())
    with rec.conversation("c2"):
        rec.genai_tool("lookup", '{"n": 1, "q": "a"}', '{"b": 2, "a": 1}')
        rec.genai_tool("lookup", '{"q":"a","n":1}', '{"a":1,"b":2}')
        rec.openinference_tool("wiki", "not json", "also not json")
    unhashed = Recorder.write(tmp_path / "unhashed.jsonl", rec.take())
    with Analyzer() as az:
        az.ingest([hashed])
        registered = "SELECT count(*) FROM duckdb_functions() WHERE function_name = ?"
        assert az.query(registered, ["toolspan_canonical_json"]).rows == [(0,)]
        az.ingest([unhashed])
        rows = az.query(
            "SELECT tool, args_fingerprint, result_hash FROM tool_calls ORDER BY start_time"
        ).rows
    assert rows == [
        ("search", sha({"q": "a", "n": 1}), sha({"hits": 1})),
        ("fetch", sha({"id": 2}), sha({"a": 2, "b": 1})),
        ("lookup", sha({"n": 1, "q": "a"}), sha({"a": 1, "b": 2})),
        ("lookup", sha({"n": 1, "q": "a"}), sha({"a": 1, "b": 2})),
        (
            "wiki",
            hashlib.sha256(b"not json").hexdigest(),
            hashlib.sha256(b"also not json").hexdigest(),
        ),
    ]


@pytest.mark.parametrize("agent_first", [True, False])
def test_a_tool_span_without_a_conversation_takes_its_traces_from_any_ingest(
    tmp_path: Path, agent_first: bool
) -> None:
    # The conversation is looked up only for traces with a tool span that
    # carries none: also when that span, or the agent span carrying the
    # conversation, came in an earlier ingest.
    rec = Recorder()
    with rec.conversation("c-agent"):
        rec.genai_tool("lookup", '{"n": 1}', "{}")
        rec.genai_tool("lookup", '{"n": 2}', "{}", conversation="c-own")
    spans = rec.take()
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    agent = [s for s in spans if s not in tools]
    first, second = (agent, tools) if agent_first else (tools, agent)
    with Analyzer() as az:
        az.ingest([Recorder.write(tmp_path / "first.jsonl", first)])
        az.ingest([Recorder.write(tmp_path / "second.jsonl", second)])
        rows = az.query("SELECT conversation_id FROM tool_calls ORDER BY start_time").rows
    assert rows == [("c-agent",), ("c-own",)]
