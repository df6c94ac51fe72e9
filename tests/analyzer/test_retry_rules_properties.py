"""The retry-safety rules against a plain-Python reading of their definitions
(docs/analyzer.md), on generated calls: whatever the calls, the SQL finds
exactly what the definition says."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolspan.analyzer import Analyzer

T0 = datetime(2026, 1, 1)
UNKNOWN = ("unknown_outcome", "timeout", "connection_error")
PERMANENT = ("http_400", "http_401", "http_403", "http_404", "http_405", "http_422")
PERMANENT += ("invalid_arguments",)
AMBIGUOUS = ("timeout", "connection_error", "http_500", "http_502", "http_503", "http_504")


@dataclass(frozen=True)
class Call:
    span_id: str
    conversation: str
    request: str | None
    tool: str
    args: str
    side_effect: str
    status: str
    error_code: str | None
    key: str | None
    replayed: bool
    outcomes: tuple[str, ...]
    read_back: str | None
    resource: str | None
    start_ms: int
    duration_ms: int
    keys_honoured: str | None

    @property
    def attempts(self) -> int:
        return len(self.outcomes)

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.duration_ms

    @property
    def order(self) -> tuple[int, str]:
        return (self.start_ms, self.span_id)


def _calls() -> st.SearchStrategy[list[Call]]:
    one = st.builds(
        lambda n, *fields: Call(f"s{n:03d}", *fields),
        st.just(0),
        st.sampled_from(["c1", "c2"]),
        st.sampled_from([None, "r1", "r2"]),
        st.sampled_from(["t1", "t2"]),
        st.sampled_from(["a", "b"]),
        st.sampled_from(["write", "write", "none"]),
        st.sampled_from(["succeeded", "succeeded", "unsafe_retry", "permanent_error"]),
        st.sampled_from([None, None, *UNKNOWN, "http_503", "http_404"]),
        st.sampled_from([None, "k1", "k2", "k3"]),
        st.booleans(),
        st.lists(
            st.sampled_from(["ok", "http_503", "timeout", "http_429", *PERMANENT[:3]]), max_size=3
        ).map(tuple),
        st.sampled_from([None, None, "absent", "found", "checked", "required", "failed"]),
        st.sampled_from([None, "o1", "o2"]),
        # Times on a 5 ms grid: calls often touch end to start (the rules' edges).
        st.integers(0, 8).map(lambda n: 5 * n),
        st.sampled_from([0, 5, 10, 15]),
        st.sampled_from([None, "true", "false"]),
    )
    return st.lists(one, max_size=14).map(
        lambda calls: [
            Call(f"s{n:03d}", *(getattr(c, f) for f in Call.__dataclass_fields__ if f != "span_id"))
            for n, c in enumerate(calls)
        ]
    )


def _load(az: Analyzer, calls: list[Call]) -> None:
    con = az.connection
    con.execute("DELETE FROM tool_call_rows")
    con.execute("DELETE FROM attempt_rows")
    for c in calls:
        start, end = T0 + timedelta(milliseconds=c.start_ms), T0 + timedelta(milliseconds=c.end_ms)
        con.execute(
            "INSERT INTO tool_call_rows (trace_id, span_id, conversation_id, request_id, tool,"
            " side_effect, idempotency_key, replayed, args_fingerprint, status, error_code,"
            " attempts, start_time, end_time, duration_ms, source, read_back, resource_key,"
            " keys_honoured)"
            " VALUES ('t', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'toolspan', ?, ?, ?)",
            [
                c.span_id,
                c.conversation,
                c.request,
                c.tool,
                c.side_effect,
                c.key,
                c.replayed,
                c.args,
                c.status,
                c.error_code,
                c.attempts,
                start,
                end,
                c.duration_ms,
                c.read_back,
                c.resource,
                c.keys_honoured,
            ],
        )
        for number, outcome in enumerate(c.outcomes, start=1):
            con.execute(
                "INSERT INTO attempt_rows (trace_id, span_id, call_span_id, conversation_id,"
                " tool, attempt, outcome, read_back) VALUES ('t', ?, ?, ?, ?, ?, ?, ?)",
                # The call's read-back on each attempt (as the tracer records a
                # verdict on both spans).
                [
                    f"{c.span_id}-{number}",
                    c.span_id,
                    c.conversation,
                    c.tool,
                    number,
                    outcome,
                    c.read_back,
                ],
            )


def _found(az: Analyzer, kind: str) -> set[tuple[Any, ...]]:
    rows = az.query(
        "SELECT conversation_id, tool, count, span_ids FROM toolspan_findings(3) WHERE kind = ?",
        [kind],
    ).rows
    return {(conv, tool, count, tuple(spans)) for conv, tool, count, spans in rows}


def _ids(calls: list[Call]) -> tuple[str, ...]:
    return tuple(c.span_id for c in sorted(calls, key=lambda c: c.order))


def _single(tools: set[str]) -> str | None:
    return next(iter(tools)) if len(tools) == 1 else None


def expected_key_churn(calls: list[Call]) -> Iterator[tuple[Any, ...]]:
    groups: dict[tuple[Any, ...], list[Call]] = defaultdict(list)
    for c in calls:
        if c.side_effect == "write" and c.status == "succeeded" and not c.replayed:
            groups[(c.conversation, c.request, c.tool, c.args)].append(c)
    for (conversation, _, tool, _), group in groups.items():
        if len(group) >= 2 and len({c.key for c in group if c.key is not None}) >= 2:
            yield (conversation, tool, len(group), _ids(group))


def expected_write_after_unknown(calls: list[Call]) -> Iterator[tuple[Any, ...]]:
    for first in calls:
        if first.side_effect != "write" or first.error_code not in UNKNOWN:
            continue
        repeats = [
            c
            for c in calls
            if c is not first
            and (c.conversation, c.tool, c.args) == (first.conversation, first.tool, first.args)
            and c.start_ms >= first.end_ms
            and c.attempts >= 1
            and not c.replayed
            and c.read_back is None
        ]
        if repeats:
            yield (
                first.conversation,
                first.tool,
                1 + len(repeats),
                (first.span_id, *_ids(repeats)),
            )


def expected_retried_permanent(calls: list[Call]) -> Iterator[tuple[Any, ...]]:
    for c in calls:
        if c.attempts >= 2 and any(o in PERMANENT for o in c.outcomes[:-1]):
            yield (c.conversation, c.tool, c.attempts, (c.span_id,))


def expected_parallel_write(calls: list[Call]) -> Iterator[tuple[Any, ...]]:
    groups: dict[tuple[str, str], list[Call]] = defaultdict(list)
    for c in calls:
        if c.side_effect == "write" and c.attempts >= 1 and c.resource is not None:
            groups[(c.conversation, c.resource)].append(c)
    for (conversation, _), group in groups.items():
        racing = [
            a
            for a in group
            if any(b is not a and a.start_ms < b.end_ms and b.start_ms < a.end_ms for b in group)
        ]
        if racing:
            yield (conversation, _single({c.tool for c in racing}), len(racing), _ids(racing))


def expected_unverified_keyed_retry(calls: list[Call]) -> Iterator[tuple[Any, ...]]:
    for c in calls:
        if c.side_effect != "write" or c.key is None or c.replayed or c.keys_honoured == "true":
            continue
        rerun_on_unknown_key = c.read_back == "required" and c.attempts >= 1
        retried_unchecked = c.read_back in (None, "failed") and any(
            o in AMBIGUOUS for o in c.outcomes[:-1]
        )
        if rerun_on_unknown_key or retried_unchecked:
            yield (c.conversation, c.tool, c.attempts, (c.span_id,))


RULES = {
    "key_churn": expected_key_churn,
    "write_after_unknown": expected_write_after_unknown,
    "retried_permanent": expected_retried_permanent,
    "parallel_write": expected_parallel_write,
    "unverified_keyed_retry": expected_unverified_keyed_retry,
}


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Analyzer]:
    with Analyzer() as az:
        yield az


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(calls=_calls())
def test_each_rule_finds_what_its_definition_says(analyzer: Analyzer, calls: list[Call]) -> None:
    _load(analyzer, calls)
    for kind, expected in RULES.items():
        assert _found(analyzer, kind) == set(expected(calls)), kind
