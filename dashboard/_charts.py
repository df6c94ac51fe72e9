"""Altair charts of the pages. Inputs are small, already aggregated frames."""

from __future__ import annotations

from typing import cast

import altair as alt
import pandas as pd

__all__ = ["calls_over_time", "retries_against_budget", "status_by_tool", "timeline", "waterfall"]

# One colour per final status / attempt outcome, stable across charts:
# success green, give-ups and refusals warm, everything else from the scheme.
_STATUS_COLOURS = {
    "succeeded": "#2e7d32",
    "ok": "#2e7d32",
    "attempt_limit": "#ef6c00",
    "wait_budget": "#f9a825",
    "deadline_exceeded": "#8d6e63",
    "permanent_error": "#c62828",
    "unsafe_retry": "#6a1b9a",
    "timeout": "#ef6c00",
    "http_429": "#f9a825",
    "http_500": "#d84315",
    "http_502": "#e64a19",
    "http_503": "#ad1457",
    "http_504": "#bf360c",
    "connection_error": "#4527a0",
}
_CATEGORY_COLOURS = {
    "agent": "#546e7a",
    "model": "#1565c0",
    "tool": "#2e7d32",
    "attempt": "#81c784",
    "other": "#bdbdbd",
}


def _status_scale(values: pd.Series) -> alt.Scale:
    domain = sorted(set(values.astype(str)))
    fallback = ["#00838f", "#ad1457", "#4527a0", "#9e9d24", "#37474f", "#d84315"]
    colours = [_STATUS_COLOURS.get(v, fallback[i % len(fallback)]) for i, v in enumerate(domain)]
    return alt.Scale(domain=domain, range=colours)


def status_by_tool(frame: pd.DataFrame) -> alt.Chart:
    """Stacked bars: calls per tool, split by final status."""
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("calls:Q", title="calls"),
            y=alt.Y("tool:N", title=None, sort="-x"),
            color=alt.Color("status:N", scale=_status_scale(frame["status"]), title="final status"),
            tooltip=["tool", "status", "calls", "retries", "scheduled_wait_s"],
        )
    )
    return cast(alt.Chart, chart)


def calls_over_time(frame: pd.DataFrame) -> alt.Chart:
    """Stacked bars: calls per time bucket, split by final status."""
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X(
                "bucket:T",
                title="call start (UTC)",
                scale=alt.Scale(type="utc"),
                axis=alt.Axis(format="%m-%d %H:%M"),
            ),
            y=alt.Y("calls:Q", title="calls", stack=True),
            color=alt.Color("status:N", scale=_status_scale(frame["status"]), title="final status"),
            tooltip=[
                alt.Tooltip("utcyearmonthdatehoursminutesseconds(bucket):T", title="bucket"),
                "status",
                "calls",
            ],
        )
    )
    return cast(alt.Chart, chart)


def timeline(attempts: pd.DataFrame, order: list[str]) -> alt.LayerChart:
    """One row per call, one bar per attempt: its own time, then its scheduled delay."""
    y = alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=420))
    colour = alt.Color("outcome:N", scale=_status_scale(attempts["outcome"]), title="attempt")
    tooltip = ["label", "attempt", "outcome", "duration_ms", "delay_s"]
    base = alt.Chart(attempts).encode(y=y, color=colour, tooltip=tooltip)
    ran = base.mark_bar(height=14).encode(
        x=alt.X("start_ms:Q", title="ms since the call started"), x2="end_ms:Q"
    )
    waited = base.mark_bar(height=14, opacity=0.35).encode(x="end_ms:Q", x2="wait_end_ms:Q")
    # A fixed step per row: Streamlit would otherwise squeeze the rows together.
    return cast(alt.LayerChart, alt.layer(ran, waited).properties(height=alt.Step(26)))


def waterfall(spans: pd.DataFrame) -> alt.Chart:
    """The span waterfall: one row per span, indented by depth, in tree order."""
    order = spans["row"].tolist()
    domain = list(_CATEGORY_COLOURS)
    chart = (
        alt.Chart(spans)
        .mark_bar(height=12)
        .encode(
            y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=420)),
            x=alt.X("start_ms:Q", title="ms since the first span"),
            x2="end_ms:Q",
            color=alt.Color(
                "category:N",
                scale=alt.Scale(domain=domain, range=[_CATEGORY_COLOURS[c] for c in domain]),
            ),
            stroke=alt.condition(
                alt.datum.status_code == "ERROR", alt.value("#c62828"), alt.value(None)
            ),
            tooltip=["name", "category", "status_code", "duration_ms", "span_id"],
        )
        .properties(height=alt.Step(20))
    )
    return cast(alt.Chart, chart)


def retries_against_budget(frame: pd.DataFrame) -> alt.FacetChart:
    """Per service: retries per minute (bars) against the retry budget (dashed line),
    over shaded buckets in which calls found the circuit breaker open."""
    x = alt.X(
        "bucket:T",
        title="call start (UTC)",
        scale=alt.Scale(type="utc"),
        axis=alt.Axis(format="%m-%d %H:%M"),
    )
    tooltip = [
        alt.Tooltip("utcyearmonthdatehoursminutesseconds(bucket):T", title="bucket"),
        "service",
        alt.Tooltip("retries_per_min:Q", format=".1f", title="retries / min"),
        alt.Tooltip("budget_per_min:Q", format=".1f", title="budget / min"),
        "refused",
        "failed_fast",
    ]
    base = alt.Chart().encode(x=x)
    open_periods = (
        base.transform_filter(alt.datum.saw_open > 0)
        .mark_rect(color="#c62828", opacity=0.15)
        .encode(x2="bucket_end:T")
    )
    retries = base.mark_bar(color="#ef6c00").encode(
        y=alt.Y("retries_per_min:Q", title="retries / min"), tooltip=tooltip
    )
    budget = base.mark_line(color="#37474f", strokeDash=[4, 3]).encode(
        y="budget_per_min:Q", tooltip=tooltip
    )
    chart = (
        alt.layer(open_periods, retries, budget, data=frame)
        .facet(row=alt.Row("service:N", title=None))
        .resolve_scale(y="independent")
    )
    return cast(alt.FacetChart, chart)
