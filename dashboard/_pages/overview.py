"""Overview: calls, success rate, retries, scheduled wait, final statuses by tool, over time."""

from __future__ import annotations

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


render()
