"""The typed read's shortcuts: ids lowercased only for files that need it, and
attribute keys stored once per distinct list (a shape) instead of per span."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolspan.analyzer import Analyzer, DatabaseError

from .conftest import Recorder, span_hex

TRACE = "00112233445566778899aabbccddeeff"
_VIEWS = {
    "spans": "trace_id, span_id, parent_span_id, name, kind, start_time, end_time, status_code, "
    "service_name, scope_name, attributes",
    "tool_calls": "*",
    "attempts": "*",
    "conversations": "*",
}


def _recorded(tmp_path: Path, name: str = "lower.jsonl") -> Path:
    rec = Recorder()
    with rec.conversation("c1"):
        rec.noise("c1")
        for i in range(4):
            rec.toolspan_call("search", "c1", {"q": i % 2}, result=i % 2)
            rec.genai_tool("lookup", json.dumps({"id": i}), "found", conversation="c1")
    return Recorder.write(tmp_path / name, rec.take(), batch=3)


def _uppercased(source: Path, target: Path) -> Path:
    """The same requests with every trace, span and parent id in uppercase."""
    lines = []
    for line in source.read_bytes().splitlines():
        request = json.loads(line)
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for field in ("traceId", "spanId", "parentSpanId"):
                        if span.get(field):
                            span[field] = span[field].upper()
        lines.append(json.dumps(request).encode())
    target.write_bytes(b"\n".join(lines) + b"\n")
    return target


def _views(az: Analyzer) -> dict[str, Any]:
    seen: dict[str, Any] = {
        view: az.query(f"SELECT {columns} FROM {view} ORDER BY ALL").rows
        for view, columns in _VIEWS.items()
    }
    seen["findings"] = [finding.to_json() for finding in az.findings(min_repeats=2)]
    return seen


def test_uppercase_ids_are_stored_lowercase(tmp_path: Path) -> None:
    lower = _recorded(tmp_path)
    upper = _uppercased(lower, tmp_path / "upper.jsonl")
    assert upper.read_bytes() != lower.read_bytes()
    with Analyzer() as expected, Analyzer() as az:
        expected.ingest([lower])
        report = az.ingest([upper])
        assert report.bad_lines == ()
        assert _views(az) == _views(expected)
        assert az.findings(min_repeats=2)  # the comparison covers findings, not only rows


def test_the_same_spans_in_either_case_are_one_span(tmp_path: Path) -> None:
    lower = _recorded(tmp_path)
    upper = _uppercased(lower, tmp_path / "upper.jsonl")
    with Analyzer() as az:
        one = az.ingest([lower]).spans
        assert one > 0
        assert az.ingest([upper]).spans == 0
        both = Analyzer()
        with both:
            assert both.ingest([lower, upper]).spans == one


def test_uppercase_ids_in_small_bundled_files(tmp_path: Path) -> None:
    """Small files are read as bundles; the ones with uppercase ids are read
    again alone, the others keep their bundle's rows."""
    rec = Recorder()
    for n in range(20):
        with rec.conversation(f"c{n}"):
            rec.toolspan_call("search", f"c{n}", {"q": n}, result=n)
    spans = rec.take()
    lower_files, mixed_files = [], []
    (tmp_path / "lower").mkdir()
    for n in range(20):
        path = Recorder.write(tmp_path / "lower" / f"{n:02d}.jsonl", spans[n::20])
        lower_files.append(path)
        if n % 3 == 0:
            path = _uppercased(path, tmp_path / f"upper-{n:02d}.jsonl")
        else:
            path = Recorder.write(tmp_path / f"lower-{n:02d}.jsonl", spans[n::20])
        mixed_files.append(path)
    with Analyzer() as expected, Analyzer() as az:
        expected.ingest(lower_files)
        report = az.ingest(mixed_files)
        assert report.files == 20 and report.bad_lines == ()
        assert _views(az) == _views(expected)


def test_uppercase_ids_beside_a_corrupt_line(tmp_path: Path) -> None:
    """A file with uppercase ids and a corrupt line: the line is reported with
    its number, every other span is kept, lowercased."""
    upper = _uppercased(_recorded(tmp_path), tmp_path / "upper.jsonl")
    lines = upper.read_bytes().splitlines(keepends=True)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join([lines[0], b'{"resourceSpans": 7}\n', *lines[1:]]))
    with Analyzer() as az:
        report = az.ingest([damaged])
        assert [(b.path, b.line) for b in report.bad_lines] == [(str(damaged), 2)]
        ids = az.query("SELECT trace_id, span_id, parent_span_id FROM spans").rows
        assert (
            len(ids)
            == report.spans
            == sum(
                len(s["spans"])
                for line in lines
                for r in json.loads(line)["resourceSpans"]
                for s in r["scopeSpans"]
            )
        )
        assert all(value == value.lower() for row in ids for value in row if value)


def _line(*spans: dict[str, Any]) -> bytes:
    request = {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}
    return json.dumps(request).encode() + b"\n"


def _span(span_id: str, **fields: Any) -> dict[str, Any]:
    return {"traceId": TRACE, "spanId": span_id, "name": span_id, **fields}


def _attr(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": value}


def test_attributes_keep_their_keys_order_and_absence(tmp_path: Path) -> None:
    path = tmp_path / "shapes.jsonl"
    path.write_bytes(
        _line(
            _span("00000000000000a1"),
            _span("00000000000000a2", attributes=[]),
            _span(
                "00000000000000a3",
                attributes=[_attr("x", {"stringValue": "1"}), _attr("y", {"intValue": "2"})],
            ),
            _span("00000000000000a4", attributes=[_attr("y", {"intValue": "3"}), _attr("x", {})]),
        )
        + _line(
            _span(
                "00000000000000a5",
                attributes=[_attr("x", {"stringValue": "4"}), _attr("y", {"boolValue": True})],
            )
        )
    )
    with Analyzer() as az:
        az.ingest([path])
        rows = az.query("SELECT span_id, attributes FROM spans ORDER BY span_id").rows
        assert rows == [
            ("00000000000000a1", None),
            ("00000000000000a2", {}),
            ("00000000000000a3", {"x": "1", "y": "2"}),
            ("00000000000000a4", {"y": "3", "x": None}),
            ("00000000000000a5", {"x": "4", "y": "true"}),
        ]
        assert list(rows[3][1]) == ["y", "x"]
        # Three distinct lists of keys ([], [x, y], [y, x]) are stored once each.
        assert az.query("SELECT count(*) FROM attribute_shapes").rows == [(3,)]


def test_a_hash_collision_between_key_lists_fails_the_batch(tmp_path: Path) -> None:
    """Spans hold the hash of their list of keys; should another list have the
    same hash, the batch is refused rather than shown with the wrong keys."""
    path = tmp_path / "one.jsonl"
    path.write_bytes(_line(_span("00000000000000b1", attributes=[_attr("k", {"intValue": 1})])))
    with Analyzer() as az:
        az.connection.execute(
            "INSERT INTO attribute_shapes SELECT hash(['k']), ['not k']"
        ).fetchall()
        with pytest.raises(DatabaseError, match="same hash"):
            az.ingest([path])
        assert az.query("SELECT count(*) FROM span_rows").rows == [(0,)]


@pytest.mark.parametrize("case", ["lower", "upper"])
def test_tool_calls_read_attributes_through_shapes(tmp_path: Path, case: str) -> None:
    rec = Recorder()
    with rec.conversation("c1"):
        call = rec.toolspan_call("create_refund", "c1", {"order": 1}, result="r1")
    path = Recorder.write(tmp_path / "calls.jsonl", rec.take())
    if case == "upper":
        path = _uppercased(path, tmp_path / "upper.jsonl")
    with Analyzer() as az:
        az.ingest([path])
        rows = az.query("SELECT span_id, tool, conversation_id FROM tool_calls").rows
        assert rows == [(span_hex(call), "create_refund", "c1")]


@pytest.mark.parametrize("one_ingest", [True, False])
def test_spans_of_a_stored_trace_are_added_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_ingest: bool
) -> None:
    """A batch whose traces are all new is stored without looking for its spans
    among the stored ones; a batch with a stored trace still is deduplicated."""
    ids = [f"{n:016x}" for n in range(1, 6)]
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(_line(*(_span(i) for i in ids[:3])))
    second.write_bytes(_line(*(_span(i) for i in ids[1:])))
    new = tmp_path / "new.jsonl"
    new.write_bytes(_line({**_span(ids[0]), "traceId": "ff" * 16}))
    # One file per batch: the second batch holds a trace stored by the first.
    monkeypatch.setattr("toolspan.analyzer._analyzer.BATCH_BYTES", 1)
    with Analyzer() as az:
        if one_ingest:
            assert az.ingest([first, second, new]).spans == 6
        else:
            assert az.ingest([first]).spans == 3
            assert az.ingest([second]).spans == 2
            assert az.ingest([new]).spans == 1
        rows = az.query("SELECT trace_id, span_id, name FROM spans ORDER BY ALL").rows
        assert rows == sorted([(TRACE, i, i) for i in ids] + [("ff" * 16, ids[0], ids[0])])
        # Each stored trace once: the new batches' traces are added as they
        # are, the others' without those stored already.
        stored = az.query("SELECT trace_id FROM stored_traces ORDER BY ALL").rows
        assert stored == [(TRACE,), ("ff" * 16,)]


def test_a_bytes_value_is_stored_as_its_base64_text(tmp_path: Path) -> None:
    """OTLP/JSON writes bytes as base64; it was read as NULL (issue 41)."""
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(
        _line(_span("00000000000000c1", attributes=[_attr("b", {"bytesValue": "AQID"})]))
    )
    with Analyzer() as az:
        az.ingest([path])
        rows = az.query("SELECT attributes FROM spans").rows
        assert rows == [({"b": "AQID"},)]
