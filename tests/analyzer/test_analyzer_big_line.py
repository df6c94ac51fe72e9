"""A legitimate line of any size the reader accepts is ingested under the
default memory limit, beside good files, and never ends in a traceback.

One OTLP/JSON line of 60,000 spans (~118 MB; the reader accepts lines up to
256 MB) under ``--db``'s 512MB: the typed read held the line whole, with a
buffer of its size per thread, ran out of memory and kept nothing. The slow
path now cuts such a line into requests of a few MB (each with its resource
and scope) before DuckDB reads them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolspan.analyzer import Analyzer, _inputs
from toolspan.analyzer._analyzer import DEFAULT_MEMORY_LIMIT
from toolspan.cli import main

T0_NS = 1_767_225_600_000_000_000
BIG_SPANS = 60_000
# ~2 KB a span, in many small values, as tool spans with their arguments are.
EXTRA_ATTRIBUTES = b"".join(
    b',{"key":"toolspan.argument.field_%02d","value":{"stringValue":"value %02d of the argument"}}'
    % (n, n)
    for n in range(18)
)


def _span(trace: int, span: int) -> bytes:
    start = T0_NS + span * 1_000
    return (
        b'{"traceId":"%032x","spanId":"%016x","name":"execute_tool get_order","kind":1,'
        b'"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":['
        b'{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},'
        b'{"key":"gen_ai.tool.name","value":{"stringValue":"get_order"}}%s],"status":{}}'
        % (trace, span, start, start + 500, EXTRA_ATTRIBUTES)
    )


def _request(first_span: int, count: int, traces: int) -> bytes:
    spans = b",".join(_span(1 + i % traces, first_span + i) for i in range(count))
    return (
        b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name",'
        b'"value":{"stringValue":"agent"}}]},"scopeSpans":[{"scope":{"name":"big"},'
        b'"spans":[' + spans + b"]}]}]}\n"
    )


@pytest.fixture(scope="module")
def big_and_good(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("big-line")
    big = folder / "big.jsonl"
    big.write_bytes(_request(1, BIG_SPANS, traces=600))
    good = folder / "good.jsonl"
    good.write_bytes(b"".join(_request(1_000_000 + 10 * n, 10, traces=1) for n in range(5)))
    return big, good


@pytest.mark.slow
def test_a_line_of_60000_spans_is_ingested_under_the_default_limit_beside_a_good_file(
    big_and_good: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big, _ = big_and_good
    assert 100e6 < big.stat().st_size < _inputs.MAX_LINE_BYTES  # a line the reader accepts
    db = tmp_path / "traces.duckdb"
    # --db: the default limit is DEFAULT_MEMORY_LIMIT (512MB).
    assert main(["analyze", str(big.parent), "--db", str(db), "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "skipped" not in captured.err
    assert json.loads(captured.out)["summary"]["spans"] == BIG_SPANS + 50
    with Analyzer(db, read_only=True) as az:
        assert az.memory_limit == DEFAULT_MEMORY_LIMIT
        (stored,) = az.query("SELECT count(DISTINCT span_id) FROM spans").rows[0]
        (bad,) = az.query("SELECT count(*) FROM bad_lines").rows[0]
    assert (stored, bad) == (BIG_SPANS + 50, 0)


def test_a_long_line_is_cut_into_requests_that_keep_every_span_once() -> None:
    raw = _request(1, 6_000, traces=7)
    assert len(raw) > _inputs.SPLIT_LINE_BYTES
    checked = _inputs.check_line(raw)
    assert checked.problems == []
    assert len(checked.keep) > 1
    assert all(len(piece) <= _inputs.SPLIT_LINE_BYTES for piece in checked.keep)
    original = json.loads(raw)
    spans = []
    for piece in checked.keep:
        request = json.loads(piece)
        (resource,) = request["resourceSpans"]
        assert resource["resource"] == original["resourceSpans"][0]["resource"]
        (scope,) = resource["scopeSpans"]
        assert scope["scope"] == {"name": "big"}
        spans += scope["spans"]
    assert spans == original["resourceSpans"][0]["scopeSpans"][0]["spans"]


def test_a_short_line_is_kept_as_it_is() -> None:
    raw = _request(1, 3, traces=1)
    assert _inputs.check_line(raw).keep == [raw]


@pytest.mark.slow
def test_a_span_too_large_for_the_limit_is_a_bad_line_and_every_other_span_is_kept(
    tmp_path: Path,
) -> None:
    # One span of ~22 MB (150,000 attributes) cannot be cut, and a 100MB limit
    # cannot read it: reported with file:line, the span beside it kept.
    huge = _request(1, 1, traces=1).replace(
        b'"attributes":[',
        b'"attributes":['
        + b"".join(b'{"key":"k%d","value":{"stringValue":"%s"}},' % (n, b"v" * 100)
                   for n in range(150_000)),
    )  # fmt: skip
    path = tmp_path / "huge.jsonl"
    path.write_bytes(huge + _request(7, 1, traces=1))
    with Analyzer(tmp_path / "db.duckdb", memory_limit="100MB") as az:
        report = az.ingest([path])
    assert report.spans == 1
    ((where, line, reason),) = [(b.path, b.line, b.reason) for b in report.bad_lines]
    assert (where, line) == (str(path), 1)
    assert reason.startswith("too large for --memory-limit 100MB: Out of Memory Error")
