"""Findings: every kind the analyzer finds (toolspan.analyzer.FINDING_KINDS)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pandas as pd
import streamlit as st

from toolspan.analyzer import FINDING_KINDS
from toolspan.dashboard import ui

PAGE_SIZE = 50
KINDS = FINDING_KINDS
METRICS_PER_ROW = 4
REASON_CHARS = 90
# A finding spans a handful of traces (a duplicate write: two); past this the
# page lists the rest and the trace view opens them one by one.
MAX_TRACES = 4
MAX_SPANS = 1_000


def _describe(finding: pd.Series) -> str:
    subject = finding["tool"] if pd.notna(finding["tool"]) else "(several tools)"
    return f"{finding['kind']} · {subject} x{int(finding['count'])} · {finding['conversation_id']}"


def _detail(raw: object) -> dict[str, Any]:
    """The finding's detail as an object, recorded arguments (JSON text) parsed too."""
    try:
        parsed = json.loads(str(raw))
    except ValueError:
        return {"detail": str(raw)}
    if not isinstance(parsed, dict):
        return {"detail": parsed}
    arguments = parsed.get("arguments")
    if isinstance(arguments, str):
        # Not JSON: shown as the text it is.
        with contextlib.suppress(ValueError):
            parsed["arguments"] = json.loads(arguments)
    return parsed


def _short(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1].rstrip() + "…"


def _table(page: pd.DataFrame) -> pd.DataFrame:
    """The readable columns: kind, tool, conversation, when, how many, a short reason."""
    reasons = [str(_detail(d).get("explanation") or "") for d in page["detail"]]
    return pd.DataFrame(
        {
            "kind": page["kind"],
            "tool": page["tool"],
            "conversation": page["conversation_id"],
            "when": page["last_seen"],
            "calls": page["count"],
            "reason": [_short(r) for r in reasons],
        }
    )


def _finding_traces(finding: pd.Series) -> None:
    """Every trace the finding involves, its calls outlined in black."""
    trace_ids = [str(t) for t in finding["trace_ids"]]
    marked = [str(s) for s in finding["span_ids"]]
    st.subheader("Its traces" if len(trace_ids) > 1 else "Its trace")
    for trace_id in trace_ids[:MAX_TRACES]:
        spans = ui.query(
            "trace_spans", trace_id=trace_id, scope="trace", scope_id="", max_spans=MAX_SPANS
        )
        st.text(f"trace {trace_id}: its calls in this finding are outlined in black")
        st.altair_chart(ui.waterfall(spans, marked=marked), width="stretch")
        if st.button(
            "Open in the trace view",
            on_click=ui.open_trace,
            args=(trace_id,),
            key=f"open_trace-{trace_id}",
        ):
            st.switch_page("_pages/trace.py")
    if len(trace_ids) > MAX_TRACES:
        rest = trace_ids[MAX_TRACES:]
        st.text(f"and {len(rest)} more traces: " + ", ".join(rest))


def _open_finding(finding: pd.Series) -> None:
    # Trace text (tool names, conversation ids, keys, recorded arguments)
    # everywhere here: plain text or JSON, never Markdown or HTML.
    st.text(_describe(finding))
    detail = _detail(finding["detail"]) if pd.notna(finding["detail"]) else {}
    explanation = str(detail.pop("explanation", "") or "")
    if explanation:
        st.text(explanation)
    if detail:
        st.json(detail, expanded=True)
    calls = ui.query(
        "finding_calls",
        span_ids=list(finding["span_ids"]),
        trace_ids=list(finding["trace_ids"]),
    )
    st.dataframe(calls, hide_index=True)
    st.button(
        "Filter every page to this conversation",
        on_click=ui.open_conversation,
        args=(str(finding["conversation_id"]),),
    )
    _finding_traces(finding)


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
    page = page.dropna(subset=["kind"]).drop(columns=["kind_counts"]).reset_index(drop=True)
    st.dataframe(
        _table(page),
        hide_index=True,
        column_config={
            "when": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
            "calls": st.column_config.NumberColumn(width="small"),
            "reason": st.column_config.TextColumn(width="large"),
        },
    )
    choice = st.selectbox(
        "Open a finding",
        range(len(page)),
        format_func=lambda i: _describe(page.iloc[i]),
        key="finding",
    )
    if choice is not None:
        _open_finding(page.iloc[int(choice)])


render()
