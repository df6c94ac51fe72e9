"""Hostile and unlucky input: every valid span is kept, every bad line and span reported.

The cases of issue 10 one by one (repeated keys, a line over DuckDB's object
size, extreme times, one bad span among ten, a 2000-deep line beside a corrupt
one, many one-span files), then a property test over random mixtures.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolspan.analyzer import Analyzer
from toolspan.cli import main

GOOD_TIME = "1767225600000000000"


def span(n: int, **override: Any) -> dict[str, Any]:
    made = {
        "traceId": f"{n:032x}",
        "spanId": f"{n:016x}",
        "name": f"span {n}",
        "kind": 1,
        "startTimeUnixNano": GOOD_TIME,
        "endTimeUnixNano": str(int(GOOD_TIME) + 1_000_000),
        "attributes": [{"key": "n", "value": {"intValue": str(n)}}],
        "status": {},
    }
    made.update(override)
    return made


def line(spans: list[Any]) -> str:
    request = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]
                },
                "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
            }
        ]
    }
    return json.dumps(request)


def deep_value(depth: int) -> str:
    return '{"arrayValue":{"values":[' * depth + '{"stringValue":"x"}' + "]}}" * depth


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(text + "\n" for text in lines))
    return path


def span_ids(analyzer: Analyzer) -> set[str]:
    return {row[0] for row in analyzer.query("SELECT span_id FROM spans").rows}


def ingest(*paths: Path) -> tuple[set[str], list[tuple[str, int, str]]]:
    with Analyzer() as analyzer:
        report = analyzer.ingest(list(paths))
        kept = span_ids(analyzer)
        assert report.spans == len(kept)
    return kept, [(Path(b.path).name, b.line, b.reason) for b in report.bad_lines]


def ids(*numbers: int) -> set[str]:
    return {f"{n:016x}" for n in numbers}


def test_repeated_keys_in_a_mixed_directory_lose_no_valid_span(tmp_path):
    write(tmp_path / "a.jsonl", [line([span(n)]) for n in range(1, 6)])
    write(
        tmp_path / "b.jsonl",
        [
            line([span(10)]),
            '{"resourceSpans":"x","resourceSpans":[]}',
            # A repeated traceId: the last one wins, as in JavaScript's JSON.parse.
            line([span(11)]).replace('"traceId"', f'"traceId": "{0:032x}", "traceId"', 1),
            "not json",
            line([span(12)]),
        ],
    )
    kept, bad = ingest(tmp_path)
    assert kept == ids(1, 2, 3, 4, 5, 10, 11, 12)
    assert [(name, number) for name, number, _ in bad] == [("b.jsonl", 4)]


def test_a_line_over_duckdbs_object_size_is_read(tmp_path):
    big = span(2, attributes=[{"key": "big", "value": {"stringValue": "x" * 40_000_000}}])
    path = write(tmp_path / "big.jsonl", [line([span(1)]), line([big]), line([span(3)])])
    kept, bad = ingest(path)
    assert (kept, bad) == (ids(1, 2, 3), [])


def test_extreme_times_are_reported_per_span_and_the_rest_kept(tmp_path):
    extreme = span(2, startTimeUnixNano="-9223372036854775808", endTimeUnixNano=str(2**63 - 1))
    too_late = span(3, endTimeUnixNano=str(2**63))
    widest = span(4, startTimeUnixNano="0", endTimeUnixNano=str(2**63 - 1))
    path = write(tmp_path / "t.jsonl", [line([span(1)]), line([extreme, too_late, widest])])
    kept, bad = ingest(path)
    assert kept == ids(1, 4)
    assert [(n, reason.split(" is ")[0]) for _, n, reason in bad] == [
        (2, "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano"),
        (2, "resourceSpans[0].scopeSpans[0].spans[1].endTimeUnixNano"),
    ]
    with Analyzer() as analyzer:
        analyzer.ingest([path])
        (duration,) = analyzer.query("SELECT duration_ms FROM spans WHERE name = 'span 4'").rows
        assert duration[0] > 9e12  # no BIGINT overflow in end - start


def test_one_bad_span_among_ten_costs_only_itself(tmp_path):
    spans = [span(n) for n in range(1, 11)]
    spans[3]["spanId"] = "not-hex"
    path = write(tmp_path / "ten.jsonl", [line(spans)])
    kept, bad = ingest(path)
    assert kept == ids(1, 2, 3, 5, 6, 7, 8, 9, 10)
    ((name, number, reason),) = bad
    assert (name, number) == ("ten.jsonl", 1)
    assert reason.startswith("resourceSpans[0].scopeSpans[0].spans[3].spanId is not 16 hex")


def test_a_2000_deep_line_is_kept_beside_a_corrupt_line(tmp_path):
    deep = line([span(2)]).replace('{"intValue": "2"}', deep_value(2000))
    deep_bad = line([span(3), span(4, spanId="bad")]).replace('{"intValue": "3"}', deep_value(2000))
    path = write(tmp_path / "deep.jsonl", [line([span(1)]), deep, deep_bad, "{truncated"])
    kept, bad = ingest(path)
    assert kept == ids(1, 2, 3)
    assert [n for _, n, _ in bad] == [3, 4]
    assert bad[0][2].startswith("1 span(s) with an invalid id, attribute key or time")
    assert bad[1][2].startswith("invalid JSON: unexpected character")


def test_many_small_files_are_read_together_and_a_bad_one_costs_only_its_lines(tmp_path):
    for n in range(1, 41):
        write(tmp_path / f"f{n:02d}.jsonl", [line([span(n)])])
    write(tmp_path / "f41.jsonl", [line([span(41)]), "junk", line([span(42)])])
    write(tmp_path / "f43.jsonl", [line([span(43)]).replace("{", '{"toolspanFile": 7, ', 1)])
    (tmp_path / "f44.jsonl").write_text("")
    with Analyzer() as analyzer:
        report = analyzer.ingest([tmp_path])
        kept = span_ids(analyzer)
        files = analyzer.query(
            "SELECT path, lines, spans, bad_lines FROM ingested_files ORDER BY path"
        ).rows
    assert kept == ids(*range(1, 44))
    assert [(Path(b.path).name, b.line) for b in report.bad_lines] == [("f41.jsonl", 2)]
    assert [(Path(p).name, n, s, b) for p, n, s, b in files][40:] == [
        ("f41.jsonl", 3, 2, 1),
        ("f43.jsonl", 1, 1, 0),
        ("f44.jsonl", 0, 0, 0),
    ]
    assert all((n, s, b) == (1, 1, 0) for _, n, s, b in files[:40])


def test_toolspan_sql_and_dashboard_share_the_fix(tmp_path, capsys):
    folder = tmp_path / "traces"
    folder.mkdir()
    spans = [span(n) for n in range(1, 11)]
    spans[5]["startTimeUnixNano"] = "-9223372036854775808"
    write(folder / "a.jsonl", [line(spans), '{"resourceSpans":"x","resourceSpans":[]}'])
    assert main(["sql", "SELECT count(*) AS n FROM spans", str(folder), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["n"] == 9
    assert "a.jsonl:1: skipped: resourceSpans[0].scopeSpans[0].spans[5]" in captured.err
    db = tmp_path / "dash.duckdb"
    with socket.socket() as busy:  # the dashboard then stops after the ingest
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["dashboard", str(folder), "--db", str(db), "--port", str(port)]) == 2
    assert "ingested 9 spans" in capsys.readouterr().out
    with Analyzer(db, read_only=True) as analyzer:
        assert len(span_ids(analyzer)) == 9


# -- property: random mixtures ---------------------------------------------------

BAD_SPANS = {
    "id": {"spanId": "xyz"},
    "trace": {"traceId": 7},
    "time": {"startTimeUnixNano": "-9223372036854775808"},
    "late": {"endTimeUnixNano": "99999999999999999999"},
    "keys": {"attributes": [{"key": "k", "value": {}}, {"key": "k", "value": {}}]},
    "status": {"status": "broken"},
    "shape": None,  # the span is a string
}
HOSTILE_LINES = {
    "junk": lambda n: "\x00garbage{{[",
    "truncated": lambda n: line([span(n)])[: 10 + n % 40],
    "wrong type": lambda n: '{"resourceSpans": {"a": 1}}',
    "array": lambda n: "[1, 2, 3]",
    "spans not a list": lambda n: '{"resourceSpans": [{"scopeSpans": [{"spans": "x"}]}]}',
    "repeated key": lambda n: '{"resourceSpans": 5, "resourceSpans": "x"}',
}

line_kinds = st.one_of(
    st.tuples(st.just("valid"), st.lists(st.sampled_from([None, *BAD_SPANS]), max_size=5)),
    st.tuples(st.just("hostile"), st.sampled_from(sorted(HOSTILE_LINES))),
    st.tuples(st.just("deep"), st.just([])),
    st.tuples(st.just("repeated good"), st.just([])),
    st.tuples(st.just("blank"), st.just([])),
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(files=st.lists(st.lists(line_kinds, max_size=6), min_size=1, max_size=20))
def test_random_mixtures_keep_exactly_the_valid_spans(tmp_path_factory, files):
    folder = tmp_path_factory.mktemp("mix")
    counter = iter(range(1, 10**6))
    expected_spans: set[str] = set()
    expected_bad: set[tuple[str, int]] = set()
    expected_indexes: set[tuple[str, int, int]] = set()
    for f, kinds in enumerate(files):
        name = f"f{f:02d}.jsonl"
        lines = []
        for number, (kind, detail) in enumerate(kinds, start=1):
            n = next(counter)
            if kind == "blank":
                lines.append("")
            elif kind == "hostile":
                lines.append(HOSTILE_LINES[detail](n))
                expected_bad.add((name, number))
            elif kind == "deep":
                lines.append(line([span(n)]).replace(f'{{"intValue": "{n}"}}', deep_value(1100)))
                expected_spans |= ids(n)
            elif kind == "repeated good":
                lines.append('{"resourceSpans": "x", ' + line([span(n)])[1:])
                expected_spans |= ids(n)
            else:
                spans: list[Any] = []
                for index, bad in enumerate(detail):
                    m = next(counter)
                    if bad is None:
                        spans.append(span(m))
                        expected_spans |= ids(m)
                    else:
                        spans.append(span(m, **BAD_SPANS[bad]) if BAD_SPANS[bad] else "span")
                        expected_bad.add((name, number))
                        expected_indexes.add((name, number, index))
                lines.append(line(spans))
        write(folder / name, lines)
    with Analyzer() as analyzer:
        report = analyzer.ingest([folder])
        assert span_ids(analyzer) == expected_spans
        assert report.spans == len(expected_spans)
    reported = {(Path(b.path).name, b.line) for b in report.bad_lines}
    assert reported == expected_bad
    for name, number, index in expected_indexes:
        reasons = [
            b.reason for b in report.bad_lines if (Path(b.path).name, b.line) == (name, number)
        ]
        assert any(f".spans[{index}]" in reason for reason in reasons), (name, number, reasons)
