"""Overview: calls, success rate, retries, scheduled wait, final statuses by tool, over time;
per service, retries per minute against the retry budget and the circuit breaker's open periods."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd
import streamlit as st

from toolspan.dashboard import ui


def _by_tool_table(by_tool: pd.DataFrame) -> pd.DataFrame:
    # Already aggregated per (tool, status) in DuckDB: a handful of rows.
    grouped = by_tool.assign(ok=(by_tool["status"] == "succeeded") * by_tool["calls"])
    table = grouped.groupby("tool", as_index=False)[
        ["calls", "ok", "retries", "scheduled_wait_s"]
    ].sum()
    table["success_rate"] = table["ok"] / table["calls"]
    return table.drop(columns="ok").sort_values("calls", ascending=False)


def _service_rates(
    frame: pd.DataFrame, bucket: timedelta, ratio: float, floor_per_s: float
) -> pd.DataFrame:
    """Per-bucket counts as rates per minute, and the budget per minute: what
    ``RetryBudget(ratio, floor_per_s)`` allows, ratio x first attempts + floor x 60 s."""
    per_minute = 60.0 / bucket.total_seconds()
    rates = frame.assign(
        bucket_end=frame["bucket"] + bucket,
        retries_per_min=frame["retries"] * per_minute,
        budget_per_min=ratio * frame["first_attempts"] * per_minute + floor_per_s * 60.0,
    )
    return rates


def _per_service(bucket: timedelta) -> None:
    """Retries against the budget and the breaker's open periods, per service."""
    frame = ui.filtered("overview_services", bucket=bucket)
    if frame.empty:
        return  # no call carries toolspan.service: no budget or breaker configured
    st.subheader("Retry budget and circuit breaker by service")
    left, right = st.columns(2)
    ratio = left.number_input(
        "Budget ratio", min_value=0.0, value=0.2, step=0.05, key="budget_ratio",
        help="RetryBudget(ratio=...) as your executors use it",
    )  # fmt: skip
    floor = right.number_input(
        "Min retries per second", min_value=0.0, value=10.0, step=1.0, key="budget_floor",
        help="RetryBudget(min_retries_per_s=...)",
    )  # fmt: skip
    st.caption(
        f"bars: retries per minute (buckets of {bucket}); dashed: the budget per minute "
        "(ratio x first attempts + min retries per second x 60); shaded: buckets in which "
        "calls found the circuit breaker open or half-open"
    )
    rates = _service_rates(frame, bucket, float(ratio), float(floor))
    st.altair_chart(ui.retries_against_budget(rates), width="stretch")
    totals = frame.groupby("service", as_index=False)[
        ["first_attempts", "retries", "refused", "failed_fast"]
    ].sum()
    st.dataframe(
        totals.rename(
            columns={"refused": "retries refused (retry_budget)",
                     "failed_fast": "failed fast (circuit_open)"}
        ),
        hide_index=True,
    )  # fmt: skip


def render() -> None:
    st.title("Overview")
    ui.require_calls()
    totals = ui.filtered("overview_totals").iloc[0]
    calls = int(totals["calls"])
    if calls == 0:
        ui.stop_with("No tool call matches the filters.", info=True)
    columns = st.columns(5)
    columns[0].metric("Calls", f"{calls:,}")
    columns[1].metric("Success rate", f"{int(totals['succeeded']) / calls:.1%}")
    columns[2].metric(
        "Retries",
        f"{int(totals['retries']):,}",
        help=f"attempts after the first; {int(totals['retried_calls']):,} calls retried",
    )
    columns[3].metric("Scheduled wait", f"{float(totals['scheduled_wait_s']):,.2f} s")
    columns[4].metric("Conversations", f"{int(totals['conversations']):,}")
    # What was read and recognised, for the whole database (not the filters).
    st.caption(f"Coverage: {ui.coverage_line()}")

    by_tool = ui.filtered("overview_by_tool")
    st.subheader("Final status by tool")
    st.altair_chart(ui.status_by_tool(by_tool), width="stretch")
    st.dataframe(
        _by_tool_table(by_tool),
        hide_index=True,
        column_config={"success_rate": st.column_config.NumberColumn(format="percent")},
    )

    st.subheader("Over time")
    bucket = ui.bucket_for(pd.Timestamp(totals["first_call"]), pd.Timestamp(totals["last_call"]))
    st.caption(f"bars of {bucket}")
    over_time = ui.filtered("overview_over_time", bucket=bucket)
    st.altair_chart(ui.calls_over_time(over_time), width="stretch")
    _per_service(bucket)


render()
