"""Retry timelines: per logical call, one bar per attempt, labelled with the final status."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from toolspan.dashboard import ui

PAGE_SIZE = 25


def _label(position: int, call: pd.Series) -> str:
    # A call is its span (trace id + span id): providers reuse call ids across
    # conversations, so the row's number, not the call id, keeps rows apart.
    # The final status on the label is what tells an early stop (one short
    # bar, wait_budget / permanent_error) from a call that simply succeeded.
    shown_id = call["call_id"] if pd.notna(call["call_id"]) else call["span_id"]
    label = f"{position}. {call['tool']} · {shown_id} → {call['status']}"
    if pd.notna(call["error_code"]) and call["error_code"] != call["status"]:
        label += f" ({call['error_code']})"
    if pd.notna(call["retry_after_s"]):
        label += f", server asked {float(call['retry_after_s']):g} s"
    if pd.notna(call["replayed"]) and bool(call["replayed"]):
        label += ", replayed"
    return label


def render() -> None:
    st.title("Retry timelines")
    ui.require_calls()
    problem_only = st.toggle("Only calls that retried or did not succeed", value=True)
    total = int(ui.filtered("timeline_count", problem_only=problem_only).iloc[0]["calls"])
    if total == 0:
        ui.stop_with("No call matches the filters.", info=True)
    offset = ui.page_offset(total, PAGE_SIZE, key="timeline_page")
    calls = ui.filtered("timeline_calls", problem_only=problem_only, limit=PAGE_SIZE, offset=offset)
    st.caption(
        f"calls {offset + 1:,}-{offset + len(calls):,} of {total:,}, most attempts first. "
        "A bar is an attempt's own time (at least a few pixels wide); its paler tail the "
        "delay scheduled after it; a diamond a call that ran no attempt (refused, replayed), "
        "a circle a call the model requested that no tool span shows running."
    )
    calls["label"] = [_label(offset + i + 1, call) for i, (_, call) in enumerate(calls.iterrows())]
    attempts = ui.query(
        "timeline_attempts",
        span_ids=calls["span_id"].tolist(),
        trace_ids=calls["trace_id"].unique().tolist(),
    )
    labelled = attempts.merge(
        calls[["trace_id", "span_id", "label"]],
        left_on=["trace_id", "call_span_id"],
        right_on=["trace_id", "span_id"],
    )
    st.altair_chart(ui.timeline(labelled, calls), width="stretch")
    st.dataframe(
        calls.drop(columns=["label"]),
        hide_index=True,
        column_order=[
            "tool",
            "call_id",
            "status",
            "error_code",
            "attempts",
            "replayed",
            "total_wait_s",
            "retry_after_s",
            "conversation_id",
            "start_time",
            "trace_id",
            "span_id",
        ],
    )


render()
