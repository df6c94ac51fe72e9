"""Findings: loops, duplicate writes, idempotency conflicts, unsafe retries."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from toolspan.dashboard import _ui
from toolspan.dashboard._pages._paging import page_offset

PAGE_SIZE = 50
KINDS = ("loop", "duplicate_write", "idempotency_conflict", "unsafe_retry")


def _describe(finding: pd.Series) -> str:
    subject = finding["tool"] if pd.notna(finding["tool"]) else "(several tools)"
    return f"{finding['kind']} · {subject} x{int(finding['count'])} · {finding['conversation_id']}"


def _open_finding(finding: pd.Series) -> None:
    st.markdown(f"**{_describe(finding)}**")
    if pd.notna(finding["detail"]):
        st.write(str(finding["detail"]))
    calls = _ui.query(
        "finding_calls",
        span_ids=list(finding["span_ids"]),
        trace_ids=list(finding["trace_ids"]),
    )
    st.dataframe(calls, hide_index=True)
    conversation, trace = st.columns(2)
    conversation.button(
        "Filter every page to this conversation",
        on_click=_ui.open_conversation,
        args=(str(finding["conversation_id"]),),
    )
    trace_ids = list(finding["trace_ids"])
    if trace_ids and trace.button(
        "Open its trace", on_click=_ui.open_trace, args=(str(trace_ids[0]),), key="open_trace"
    ):
        st.switch_page("_pages/trace.py")


def render() -> None:
    st.title("Findings")
    _ui.require_calls()
    by_kind = _ui.filtered("findings_by_kind").set_index("kind")["findings"]
    for column, kind in zip(st.columns(len(KINDS)), KINDS, strict=True):
        column.metric(kind.replace("_", " "), f"{int(by_kind.get(kind, 0)):,}")
    kinds = st.multiselect("Kinds", list(KINDS), key="finding_kinds")
    total = int(by_kind[list(kinds)].sum() if kinds else by_kind.sum()) if len(by_kind) else 0
    if total == 0:
        _ui.stop_with("No finding matches the filters.", info=True)
    offset = page_offset(total, PAGE_SIZE, key="findings_page")
    page = _ui.filtered("findings_page", kinds=list(kinds), limit=PAGE_SIZE, offset=offset)
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
