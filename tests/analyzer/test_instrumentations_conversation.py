"""The conversation a recorded stack's app named is the one the analyzer reads.

A conversation groups the calls the findings compare (a loop is a repeat
within one conversation). Without the app's id the analyzer falls back to the
trace; a chat whose turns are separate traces would then be cut in pieces.
Vercel AI SDK 7 (``@ai-sdk/otel``) has no telemetry metadata any more: the
app's ``runtimeContext.sessionId``, let through by ``includeRuntimeContext``,
becomes ``ai.settings.context.sessionId`` on the root ``invoke_agent`` span only.
"""

from __future__ import annotations

import pytest

from tests.clickhouse_backend import Backend
from toolspan.analyzer import Analyzer, ClickHouseAnalyzer

from .instrumentations import fixture_labels, fixture_spans
from .test_analyzer_clickhouse import Table

# The folder -> the conversation id its app gave each scenario.
SESSIONS = {
    "vercel-ai-7-on": "conv-{scenario}-v7",
    "vercel-ai-7-off": "conv-{scenario}-v7",
}


def _by_scenario(rows: list[tuple[str, str]], traces: dict[str, str]) -> dict[str, set[str]]:
    """(trace_id, conversation_id) rows as scenario -> the conversation ids read."""
    read: dict[str, set[str]] = {}
    for trace_id, conversation in rows:
        read.setdefault(traces[trace_id], set()).add(conversation)
    return read


def _expected(folder: str) -> dict[str, set[str]]:
    scenarios = set(fixture_labels(folder)["traces"].values())
    return {s: {SESSIONS[folder].format(scenario=s)} for s in scenarios}


@pytest.mark.parametrize("folder", sorted(SESSIONS))
def test_the_apps_conversation_id_is_read_on_duckdb(folder: str) -> None:
    with Analyzer() as az:
        az.ingest([fixture_spans(folder)])
        rows = az.query("SELECT DISTINCT trace_id, conversation_id FROM tool_calls").rows
    assert _by_scenario(rows, fixture_labels(folder)["traces"]) == _expected(folder)


@pytest.mark.parametrize("folder", sorted(SESSIONS))
def test_the_apps_conversation_id_is_read_on_clickhouse(clickhouse: Backend, folder: str) -> None:
    table = Table(clickhouse)
    try:
        table.load(fixture_spans(folder))
        with ClickHouseAnalyzer(table.source) as az:
            result = az.tool_calls()
    finally:
        table.drop()
    at = {name: i for i, name in enumerate(result.columns)}
    rows = [(row[at["trace_id"]], row[at["conversation_id"]]) for row in result.rows]
    assert _by_scenario(rows, fixture_labels(folder)["traces"]) == _expected(folder)
