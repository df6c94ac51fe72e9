"""Storage details behind the views: lines the typed read accepts but the
format forbids, materialised tables kept in step, schema versions."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from toolspan.analyzer import Analyzer, DatabaseError

from .conftest import Recorder

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
