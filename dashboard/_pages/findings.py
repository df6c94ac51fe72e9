"""Findings: every kind the analyzer finds (toolspan.analyzer.FINDING_KINDS)."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from toolspan.analyzer import FINDING_KINDS
from toolspan.dashboard import ui

PAGE_SIZE = 50
KINDS = FINDING_KINDS
METRICS_PER_ROW = 4


def _describe(finding: pd.Series) -> str:
    subject = finding["tool"] if pd.notna(finding["tool"]) else "(several tools)"
    return f"{finding['kind']} · {subject} x{int(finding['count'])} · {finding['conversation_id']}"


def _explanation(detail: object) -> str:
    """The finding's one-sentence explanation and fix (``detail.explanation``)."""
    try:
        parsed = json.loads(str(detail))
    except ValueError:
        return ""
    return str(parsed.get("explanation") or "") if isinstance(parsed, dict) else ""


def _show_detail(detail: str) -> None:
    try:
        st.json(json.loads(detail), expanded=True)
    except ValueError:
        st.code(detail, language=None, wrap_lines=True)


def _open_finding(finding: pd.Series) -> None:
    # Trace text (tool names, conversation ids, keys, recorded arguments)
    # everywhere here: plain text or JSON, never Markdown or HTML.
    st.text(_describe(finding))
    st.text(_explanation(finding["detail"]))
    if pd.notna(finding["detail"]):
        _show_detail(str(finding["detail"]))
    calls = ui.query(
        "finding_calls",
        span_ids=list(finding["span_ids"]),
        trace_ids=list(finding["trace_ids"]),
    )
    st.dataframe(calls, hide_index=True)
    conversation, trace = st.columns(2)
    conversation.button(
        "Filter every page to this conversation",
        on_click=ui.open_conversation,
        args=(str(finding["conversation_id"]),),
    )
    trace_ids = list(finding["trace_ids"])
    if trace_ids and trace.button(
        "Open its trace", on_click=ui.open_trace, args=(str(trace_ids[0]),), key="open_trace"
    ):
        st.switch_page("_pages/trace.py")


def _kind_counts(raw: object) -> dict[str, int]:
    # A DuckDB MAP arrives as a dict, or as {"key": [...], "value": [...]}.
    if isinstance(raw, dict) and set(raw) == {"key", "value"}:
        raw = dict(zip(raw["key"], raw["value"], strict=True))
    return {str(k): int(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def render() -> None:
    st.title("Findings")
    ui.require_calls()
    kinds = st.multiselect("Kinds", list(KINDS), key="finding_kinds")
    offset = st.session_state.get("findings_offset", 0)
    page = ui.filtered("findings_page", kinds=list(kinds), limit=PAGE_SIZE, offset=offset)
    by_kind = _kind_counts(page["kind_counts"].iloc[0])
    for row in range(0, len(KINDS), METRICS_PER_ROW):
        kinds_in_row = KINDS[row : row + METRICS_PER_ROW]
        for column, kind in zip(st.columns(METRICS_PER_ROW), kinds_in_row, strict=False):
            column.metric(kind.replace("_", " "), f"{by_kind.get(kind, 0):,}")
    total = sum(n for kind, n in by_kind.items() if not kinds or kind in kinds)
    if total == 0:
        ui.stop_with("No finding matches the filters.", info=True)
    new_offset = ui.page_offset(total, PAGE_SIZE, key="findings_page")
    if new_offset != offset:
        # The pager sits under the counts it is sized by: rerun for the new page.
        st.session_state["findings_offset"] = new_offset
        st.rerun()
    page = page.dropna(subset=["kind"]).drop(columns=["kind_counts"])
    st.dataframe(page.drop(columns=["span_ids", "trace_ids"]), hide_index=True)
    choice = st.selectbox(
        "Open a finding",
        range(len(page)),
        format_func=lambda i: _describe(page.iloc[i]),
        key="finding",
    )
    if choice is not None:
        _open_finding(page.iloc[int(choice)])


render()
