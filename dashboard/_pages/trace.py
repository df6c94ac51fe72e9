"""Trace view: the waterfall of one trace, request or turn, with each span's attributes."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from toolspan.dashboard import ui

PAGE_SIZE = 200
MAX_SPANS = 1_000
WHOLE_TRACE = ("trace", "")


def _pick_trace() -> str:
    total = int(ui.filtered("trace_count").iloc[0]["traces"])
    if total == 0:
        ui.stop_with("No trace holds a call that matches the filters.", info=True)
    offset = ui.page_offset(total, PAGE_SIZE, key="trace_page")
    traces = ui.filtered("trace_list", limit=PAGE_SIZE, offset=offset)
    labels = {
        row.trace_id: f"{row.trace_id} · {row.conversation_id} · {row.calls} calls, "
        f"{row.failed_calls} failed"
        for row in traces.itertuples()
    }
    opened = st.session_state.get(ui.TRACE_KEY)
    if opened and opened not in labels:
        labels = {opened: f"{opened} (opened from a finding)", **labels}
    options = list(labels)
    return str(st.selectbox("Trace", options, format_func=labels.__getitem__, key=ui.TRACE_KEY))


def _pick_scope(trace_id: str) -> tuple[str, str]:
    scopes = ui.query("trace_scopes", trace_id=trace_id)
    options = [WHOLE_TRACE, *zip(scopes["scope"], scopes["scope_id"], strict=True)]
    chosen = st.selectbox(
        "Show",
        options,
        format_func=lambda s: "the whole trace" if s == WHOLE_TRACE else f"{s[0]} {s[1]}",
        # One widget per trace: a picker never keeps another trace's choice.
        key=f"scope-{trace_id}",
    )
    return chosen if chosen is not None else WHOLE_TRACE


def _attributes(raw: Any) -> Any:
    # MAP columns arrive as dicts (or key/value lists), JSON columns as text.
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    if isinstance(raw, dict) and set(raw) == {"key", "value"}:
        return dict(zip(raw["key"], raw["value"], strict=False))
    return raw


def _span_attributes(trace_id: str, spans: pd.DataFrame, key: str) -> None:
    """A span picker and the picked span's attributes.

    The picker is keyed per trace and scope, and its options are the span ids
    of the trace shown: after a trace switch Streamlit makes a new widget, so
    the picker never names a span of the previous trace.
    """
    names = {
        row.span_id: f"{'  ' * int(row.depth)}{row.name} [{row.span_id[-6:]}]"
        for row in spans.itertuples()
    }
    picked = st.selectbox("Span", list(names), format_func=names.__getitem__, key=key)
    if picked is None:
        return
    span = spans.loc[spans["span_id"] == picked].iloc[0]
    attributes = ui.query("span_attributes", trace_id=trace_id, span_id=picked)
    st.json(
        {
            "trace_id": trace_id,
            "span_id": picked,
            "name": span["name"],
            "status": span["status_code"],
            "status_message": None if pd.isna(span["status_message"]) else span["status_message"],
            "duration_ms": float(span["duration_ms"]),
            "attributes": _attributes(attributes["attributes"].iloc[0]) if len(attributes) else {},
        }
    )


def render() -> None:
    st.title("Trace view")
    ui.require_calls()
    trace_id = _pick_trace()
    scope, scope_id = _pick_scope(trace_id)
    spans = ui.query(
        "trace_spans", trace_id=trace_id, scope=scope, scope_id=scope_id, max_spans=MAX_SPANS
    )
    if spans.empty:
        ui.stop_with("This trace has no spans in the database.", info=True)
    total = int(spans["total_spans"].iloc[0])
    if total > len(spans):
        st.warning(f"Showing the first {len(spans):,} of {total:,} spans.")
    st.altair_chart(ui.waterfall(spans), width="stretch")
    _span_attributes(trace_id, spans, key=f"span-{trace_id}-{scope}-{scope_id}")
    st.dataframe(spans.drop(columns=["total_spans"]), hide_index=True)


render()
