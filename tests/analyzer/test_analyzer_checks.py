"""The typed read's checks, written for speed (bench/analyzer_bench.py), against
their plain definitions: property tests over random input."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan._sql import load_statements
from toolspan.analyzer import Analyzer

# Ids that are nearly right as often as not: hex of about the right length,
# upper case, other characters (multi-byte ones too), empty, missing.
near_hex = st.text(alphabet="0123456789abcdefABCDEFgxz\u00e9\u4e2d", min_size=0, max_size=34)
exact_hex = st.integers(min_value=0, max_value=2**128 - 1).map(lambda n: f"{n:032x}")
ids = st.one_of(st.none(), near_hex, exact_hex, exact_hex.map(lambda t: t[:16]))


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Analyzer]:
    with Analyzer() as az:
        az.connection.execute(
            load_statements("toolspan.analyzer", "sql/ingest.sql")["span_ok_macro"]
        )
        yield az


def plainly_ok(trace_id: str | None, span_id: str | None) -> bool:
    return (
        trace_id is not None
        and span_id is not None
        and re.fullmatch("[0-9a-f]{32}", trace_id) is not None
        and re.fullmatch("[0-9a-f]{16}", span_id) is not None
    )


@given(trace_id=ids, span_id=ids)
def test_ids_are_valid_exactly_when_each_is_lowercase_hex_of_its_length(
    analyzer: Analyzer, trace_id: str | None, span_id: str | None
) -> None:
    # One match over both ids joined, with their lengths in bytes, must say
    # what a match of each id alone says (a 31 + 17 split must not pass).
    row = analyzer.query(
        "SELECT toolspan_span_ok(?::VARCHAR, ?::VARCHAR, true, true)", [trace_id, span_id]
    ).rows[0]
    assert row[0] is plainly_ok(trace_id, span_id)


def test_a_misplaced_split_of_valid_hex_is_not_valid(analyzer: Analyzer) -> None:
    valid = "0123456789abcdef" * 3
    for cut in (31, 33, 0, 48):
        row = analyzer.query(
            "SELECT toolspan_span_ok(?, ?, true, true)", [valid[:cut], valid[cut:]]
        ).rows[0]
        assert row[0] is False, cut
    assert analyzer.query(
        "SELECT toolspan_span_ok(?, ?, true, true)", [valid[:32], valid[32:]]
    ).rows == [(True,)]


# The side effect of a call as first written: a correlated EXISTS per call.
_SIDE_EFFECT_BY_EXISTS = """
CREATE OR REPLACE TEMP MACRO side_effect_by_exists(tool_name, declared, span_source) AS
    CASE
        WHEN EXISTS (SELECT 1 FROM write_tools AS w WHERE tool_name GLOB w.pattern) THEN 'write'
        WHEN declared IS NOT NULL OR span_source = 'toolspan' THEN declared
        WHEN EXISTS (SELECT 1 FROM write_tools) THEN 'none'
    END
"""

tool_names = st.one_of(st.none(), st.sampled_from(["send_email", "search", "send", "s*", "[x]"]))
patterns = st.lists(st.sampled_from(["send_*", "search", "*", "s?arch", "[a-s]*", "x"]), max_size=3)


@given(
    calls=st.lists(
        st.tuples(
            tool_names,
            st.sampled_from([None, "write", "none", "read"]),
            st.sampled_from(["toolspan", "genai", "openinference"]),
        ),
        min_size=1,
        max_size=8,
    ),
    write_tools=patterns,
)
def test_side_effects_match_the_correlated_exists(
    analyzer: Analyzer, calls: list[tuple[str | None, str, str]], write_tools: list[str]
) -> None:
    con = analyzer.connection
    con.execute(_SIDE_EFFECT_BY_EXISTS)
    con.execute("DELETE FROM write_tools")
    for pattern in dict.fromkeys(write_tools):
        con.execute("INSERT INTO write_tools VALUES (?)", [pattern])
    rows = con.execute(
        "SELECT toolspan_side_effect(t, d, s), side_effect_by_exists(t, d, s) "
        "FROM (SELECT unnest(?::VARCHAR[]) AS t, unnest(?::VARCHAR[]) AS d, "
        "unnest(?::VARCHAR[]) AS s)",
        [[c[0] for c in calls], [c[1] for c in calls], [c[2] for c in calls]],
    ).fetchall()
    assert [new for new, _ in rows] == [old for _, old in rows]
    con.execute("DELETE FROM write_tools")


# The rule forget_dominated_calls applies (derive.sql), plainly: a call span is
# dominated when a richer call span of its trace (toolspan > genai >
# openinference) for the same tool is its parent or child, or has its call id.
_RICHNESS = {"toolspan": 3, "genai": 2, "openinference": 1}
CallSpan = tuple[str, str, str | None, str, str | None, str | None]


def plainly_dominated(spans: list[CallSpan]) -> set[tuple[str, str]]:
    calls = [span for span in spans if span[3] != "attempt"]
    return {
        (trace, span_id)
        for trace, span_id, parent, source, tool, call_id in calls
        for other_trace, other_id, other_parent, other_source, other_tool, other_call in calls
        if other_trace == trace
        and _RICHNESS[other_source] > _RICHNESS[source]
        and other_tool == tool
        and (
            other_parent == span_id
            or other_id == parent
            or (call_id is not None and other_call == call_id)
        )
    }


_DERIVE = load_statements("toolspan.analyzer", "sql/derive.sql")

call_spans = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t2"]),
        st.sampled_from(["a", "b", "c", "d", "e"]),
        st.sampled_from([None, "a", "b", "c", "x"]),
        st.sampled_from(["toolspan", "genai", "openinference", "attempt"]),
        st.sampled_from([None, "search", "send"]),
        st.sampled_from([None, "call-1", "call-2"]),
    ),
    max_size=10,
    unique_by=lambda span: (span[0], span[1]),
)


@given(spans=call_spans)
def test_calls_without_the_dominated_match_the_one_statement(
    analyzer: Analyzer, spans: list[CallSpan]
) -> None:
    """Inserting every call span and deleting the dominated ones after leaves
    the calls that one statement leaving them out made: every call but the
    dominated, each with its columns as inserted."""
    con = analyzer.connection
    for name in ("touched_traces", "attribute_positions"):
        con.execute(_DERIVE[name])
    # An empty touched_tool_spans of the refresh's columns (spans from rowid 0 on).
    con.execute(_DERIVE["extract_tool_spans"], [0])
    columns = ("trace_id", "span_id", "parent_span_id", "source", "tool", "call_id")
    con.execute(
        f"INSERT INTO touched_tool_spans ({', '.join(columns)}) "
        "SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
        "unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
        [[span[i] for span in spans] for i in range(len(columns))],
    )
    con.execute(_DERIVE["trace_conversations"], [0])
    con.execute("DELETE FROM tool_call_rows")
    con.execute(_DERIVE["insert_tool_calls"])
    ordered = "SELECT * FROM tool_call_rows ORDER BY ALL"
    dominated = plainly_dominated(spans)
    expected = [row for row in con.execute(ordered).fetchall() if row[:2] not in dominated]
    [(_, weak, _)] = con.execute(_DERIVE["count_touched_tool_spans"]).fetchall()
    if weak:
        con.execute(_DERIVE["forget_dominated_calls"])
    assert con.execute(ordered).fetchall() == expected
    con.execute("DELETE FROM tool_call_rows")
