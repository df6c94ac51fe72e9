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


# The calls as first written: one statement that leaves the dominated call
# spans out (NOT EXISTS), where the refresh inserts every call span and removes
# the dominated ones after, only when a touched span is weak (derive.sql).
_CALLS_IN_ONE_STATEMENT = """
CREATE OR REPLACE TEMP TABLE calls_in_one_statement AS
WITH call_key AS (
    SELECT
        trace_id, span_id, parent_span_id, call_id, tool,
        CASE source WHEN 'toolspan' THEN 3 WHEN 'genai' THEN 2 ELSE 1 END AS richness
    FROM touched_tool_spans
    WHERE source <> 'attempt'
),
weak AS (
    SELECT * FROM call_key WHERE richness < 3
),
strong AS (
    SELECT * FROM call_key
    WHERE richness > 1 AND trace_id IN (SELECT trace_id FROM weak)
),
dominated AS (
    SELECT weak.trace_id, weak.span_id
    FROM weak
    JOIN strong ON strong.trace_id = weak.trace_id AND strong.parent_span_id = weak.span_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
    UNION
    SELECT weak.trace_id, weak.span_id
    FROM weak
    JOIN strong ON strong.trace_id = weak.trace_id AND strong.span_id = weak.parent_span_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
    UNION
    SELECT weak.trace_id, weak.span_id
    FROM weak
    JOIN strong ON strong.trace_id = weak.trace_id AND strong.call_id = weak.call_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
),
attempt_count AS (
    SELECT trace_id, parent_span_id AS span_id, count(*) AS attempts
    FROM touched_tool_spans
    WHERE source = 'attempt'
    GROUP BY ALL
),
call AS (
    SELECT
        c.*,
        coalesce(c.conversation_attr, tc.conversation_id, c.trace_id) AS conversation_id,
        toolspan_side_effect(c.tool, c.side_effect_attr, c.source) AS side_effect,
        coalesce(c.status_attr, CASE WHEN c.status_code = 'ERROR' THEN 'error' ELSE 'succeeded' END)
            AS status,
        coalesce(c.attempts_attr, ac.attempts, CASE WHEN c.source = 'toolspan' THEN 0 ELSE 1 END)
            AS attempts
    FROM touched_tool_spans AS c
    LEFT JOIN touched_conversations AS tc USING (trace_id)
    LEFT JOIN attempt_count AS ac ON ac.trace_id = c.trace_id AND ac.span_id = c.span_id
    WHERE c.source <> 'attempt'
      AND NOT EXISTS (
        SELECT 1 FROM dominated AS d WHERE d.trace_id = c.trace_id AND d.span_id = c.span_id)
)
SELECT
    trace_id, span_id, parent_span_id, conversation_id, request_id, turn_id, tool, call_id,
    side_effect, idempotency_key, coalesce(replayed, false) AS replayed, args_fingerprint,
    arguments,
    CASE
        WHEN status = 'succeeded' THEN coalesce(result_hash, result_fingerprint, 'ok')
        ELSE coalesce(error_code, status_code)
    END AS answer,
    coalesce(result_hash, result_fingerprint) AS result_hash,
    status, error_code, retryable, attempts, total_wait_s, retry_after_s, retry_initiator,
    start_time, end_time, duration_ms, source, side_effect_attr, read_back, resource_key
FROM call
"""
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
    analyzer: Analyzer, spans: list[tuple[str, str, str | None, str, str | None, str | None]]
) -> None:
    con = analyzer.connection
    for name in ("touched_traces", "attribute_positions", "extract_tool_spans"):
        con.execute(_DERIVE[name])  # an empty touched_tool_spans of the refresh's columns
    columns = ("trace_id", "span_id", "parent_span_id", "source", "tool", "call_id")
    con.execute(
        f"INSERT INTO touched_tool_spans ({', '.join(columns)}) "
        "SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
        "unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
        [[span[i] for span in spans] for i in range(len(columns))],
    )
    con.execute(_DERIVE["trace_conversations"])
    con.execute(_CALLS_IN_ONE_STATEMENT)
    con.execute("DELETE FROM tool_call_rows")
    con.execute(_DERIVE["insert_tool_calls"])
    [(_, weak)] = con.execute(_DERIVE["count_touched_tool_spans"]).fetchall()
    if weak:
        con.execute(_DERIVE["forget_dominated_calls"])
    ordered = "ORDER BY ALL"
    expected = con.execute(f"SELECT * FROM calls_in_one_statement {ordered}").fetchall()
    assert con.execute(f"SELECT * FROM tool_call_rows {ordered}").fetchall() == expected
    con.execute("DELETE FROM tool_call_rows")
