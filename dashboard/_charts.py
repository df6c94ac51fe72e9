"""Altair charts of the pages. Inputs are small, already aggregated frames."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import timedelta
from typing import cast

import altair as alt
import pandas as pd

from ._colours import colour_for

__all__ = [
    "calls_over_time",
    "retries_against_budget",
    "status_by_tool",
    "time_format",
    "timeline",
    "waterfall",
]

_CATEGORY_COLOURS = {
    "agent": "#555555",
    "model": "#0072B2",
    "tool": "#009E73",
    "attempt": "#56B4E9",
    "other": "#BBBBBB",
}
# An attempt shorter than this share of the axis is drawn this wide (its
# tooltip keeps the real duration): a 0.3 ms attempt is still a visible bar.
_MIN_BAR_SHARE = 0.01
_ERROR_STROKE = "#D55E00"
_MARKED_STROKE = "#000000"
_LABEL_LIMIT = 420
# Legend and marker wording for statuses whose name alone misleads: a requested
# call did not fail to run an attempt, it was never seen running.
_STATUS_LABELS = {"requested": "requested (by the model, not run)"}
_REQUESTED_NOTE = "requested by the model; no tool span ran it"


def _svg(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    # SVG, not canvas: crisp at any zoom, and every row, bar and legend entry is an
    # element a browser test (or a screen reader, through ARIA) can find.
    return chart.properties(usermeta={"embedOptions": {"renderer": "svg"}})


def _status_scale(values: pd.Series) -> alt.Scale:
    """Every value its own colour (``_colours``): the same on every chart and dataset."""
    domain = sorted(set(values.astype(str)))
    return alt.Scale(domain=domain, range=[colour_for(v) for v in domain])


def time_format(first: object, last: object) -> str:
    """A d3 time format that fits the range: seconds for seconds, the year over days."""
    if pd.isna(first) or pd.isna(last):
        return "%Y-%m-%d %H:%M"
    span = pd.Timestamp(cast(str, last)) - pd.Timestamp(cast(str, first))
    if span <= timedelta(minutes=10):
        return "%H:%M:%S"
    if span <= timedelta(days=1):
        return "%H:%M"
    if span <= timedelta(days=60):
        return "%Y-%m-%d %H:%M"
    return "%Y-%m-%d"


def _time_x(frame: pd.DataFrame) -> alt.X:
    fmt = time_format(frame["bucket"].min(), frame["bucket"].max()) if len(frame) else "%H:%M"
    return alt.X(
        "bucket:T",
        title="call start (UTC)",
        scale=alt.Scale(type="utc"),
        axis=alt.Axis(format=fmt, labelOverlap=True),
    )


def _count_axis(title: str) -> alt.Axis:
    # Calls come in whole numbers: no 0.5 call on the axis.
    return alt.Axis(title=title, tickMinStep=1, format="d")


def status_by_tool(frame: pd.DataFrame) -> alt.Chart:
    """Stacked bars: calls per tool, split by final status."""
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("calls:Q", axis=_count_axis("calls")),
            y=alt.Y("tool:N", title=None, sort="-x"),
            color=alt.Color("status:N", scale=_status_scale(frame["status"]), title="final status"),
            tooltip=["tool", "status", "calls", "retries", "scheduled_wait_s"],
        )
    )
    return cast(alt.Chart, _svg(chart))


def calls_over_time(frame: pd.DataFrame) -> alt.Chart:
    """Stacked bars: calls per time bucket, split by final status."""
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=_time_x(frame),
            y=alt.Y("calls:Q", stack=True, axis=_count_axis("calls")),
            color=alt.Color("status:N", scale=_status_scale(frame["status"]), title="final status"),
            tooltip=[
                alt.Tooltip("utcyearmonthdatehoursminutesseconds(bucket):T", title="bucket"),
                "status",
                "calls",
            ],
        )
    )
    return cast(alt.Chart, _svg(chart))


def timeline(attempts: pd.DataFrame, calls: pd.DataFrame) -> alt.LayerChart:
    """One row per call (``calls["label"]``, unique, in page order), one bar per attempt:
    its own time, then its scheduled delay; a call that ran no attempt is a labelled marker.

    ``attempts`` has ``label``, ``attempt``, ``outcome``, ``start_ms``, ``end_ms``,
    ``wait_end_ms``, ``duration_ms``, ``delay_s``; ``calls`` has ``label``, ``status``
    and ``attempts``.
    """
    order = calls["label"].tolist()
    ran_rows = attempts.assign(
        shown_end_ms=attempts["end_ms"].clip(
            lower=attempts["start_ms"] + _min_bar_ms(attempts["wait_end_ms"])
        )
    )
    refused = calls.loc[~calls["label"].isin(set(attempts["label"]))].assign(
        outcome=lambda frame: frame["status"].astype(str),
        start_ms=0.0,
        note=lambda frame: frame["outcome"].map(_marker_note),
        marker=lambda frame: frame["outcome"].map(
            lambda status: "requested" if status == "requested" else "no attempt"
        ),
    )
    outcomes = pd.concat([ran_rows["outcome"], refused["outcome"]], ignore_index=True)
    y = alt.Y(
        "label:N",
        title=None,
        # Every call of the page is a row, in page order, whether or not it ran.
        scale=alt.Scale(domain=order),
        axis=alt.Axis(labelLimit=_LABEL_LIMIT),
    )
    colour = alt.Color(
        "outcome:N",
        scale=_status_scale(outcomes),
        title="attempt outcome / status",
        # One legend for all layers (Vega-Lite merges them; a layer without
        # one would drop it), in the bars' colour, not the pale delay tail's.
        legend=alt.Legend(
            symbolOpacity=1, symbolType="square", labelExpr=_label_expr(_STATUS_LABELS)
        ),
    )
    x = alt.X("start_ms:Q", title="ms since the call started")
    ran = (
        alt.Chart(ran_rows)
        .mark_bar(height=14)
        .encode(
            y=y,
            x=x,
            x2="shown_end_ms:Q",
            color=colour,
            tooltip=["label", "attempt", "outcome", "duration_ms", "delay_s"],
        )
    )
    waited = (
        alt.Chart(ran_rows)
        .mark_bar(height=14, opacity=0.35)
        .encode(
            y=y,
            x="end_ms:Q",
            x2="wait_end_ms:Q",
            color=colour,
        )
    )
    markers = alt.Chart(refused).encode(y=y, x=x, tooltip=["label", "note"])
    # A requested call is a circle, a refused or replayed one a diamond: told apart
    # without the colour too.
    shape = alt.Shape(
        "marker:N",
        scale=alt.Scale(domain=["no attempt", "requested"], range=["diamond", "circle"]),
        legend=None,
    )
    marker = markers.mark_point(size=140, filled=True, opacity=1).encode(color=colour, shape=shape)
    note = markers.mark_text(align="left", dx=10, fontSize=11).encode(text="note:N")
    # A fixed step per row: Streamlit would otherwise squeeze the rows together.
    return cast(
        alt.LayerChart,
        _svg(alt.layer(waited, ran, marker, note).properties(height=alt.Step(26))),
    )


def _marker_note(status: str) -> str:
    return _REQUESTED_NOTE if status == "requested" else f"no attempt: {status}"


def _label_expr(labels: dict[str, str]) -> str:
    """A Vega label expression that shows each key of ``labels`` as its value."""
    expr = "datum.label"
    for value, shown in labels.items():
        expr = f"datum.label === {json.dumps(value)} ? {json.dumps(shown)} : {expr}"
    return expr


def _min_bar_ms(ends: pd.Series) -> float:
    extent = float(ends.max()) if len(ends) and pd.notna(ends.max()) else 0.0
    return max(extent, 1.0) * _MIN_BAR_SHARE


def _tree_prefix(depth: int) -> str:
    # Visible guides, not spaces: Vega trims a label's leading whitespace.
    return "│  " * (depth - 1) + "└ " if depth else ""


def waterfall(spans: pd.DataFrame, marked: Collection[str] = ()) -> alt.Chart:
    """The span waterfall: one row per span in tree order, labels indented by depth and
    left-aligned so the nesting shows; spans in ``marked`` (span ids) outlined in black."""
    marked_ids = set(marked)
    rows = spans.assign(
        row=[
            f"{_tree_prefix(int(depth))}{name} [{span_id[-6:]}]"
            for depth, name, span_id in zip(
                spans["depth"], spans["name"], spans["span_id"], strict=True
            )
        ],
        outline=[
            "in the finding" if span_id in marked_ids else "error" if code == "ERROR" else "none"
            for span_id, code in zip(spans["span_id"], spans["status_code"], strict=True)
        ],
    )
    order = rows["row"].tolist()
    # Vega cannot measure text before it lays out the axis: estimate the widest
    # label (11 px font, ~6.5 px a character), capped.
    label_px = min(_LABEL_LIMIT, 12 + round(6.5 * max((len(r) for r in order), default=0)))
    domain = list(_CATEGORY_COLOURS)
    outlines = ["in the finding", "error", "none"]
    stroke = alt.Stroke(
        "outline:N",
        scale=alt.Scale(domain=outlines, range=[_MARKED_STROKE, _ERROR_STROKE, "transparent"]),
        legend=alt.Legend(title="outline", values=outlines[:2]) if marked_ids else None,
    )
    chart = (
        alt.Chart(rows)
        .mark_bar(height=12, strokeWidth=2)
        .encode(
            y=alt.Y(
                "row:N",
                sort=order,
                title=None,
                # Left-aligned labels, pushed left by the widest one: indentation shows depth.
                axis=alt.Axis(labelLimit=label_px, labelAlign="left", labelPadding=label_px),
            ),
            x=alt.X("start_ms:Q", title="ms since the first span"),
            x2="end_ms:Q",
            color=alt.Color(
                "category:N",
                scale=alt.Scale(domain=domain, range=[_CATEGORY_COLOURS[c] for c in domain]),
            ),
            stroke=stroke,
            tooltip=["name", "category", "status_code", "duration_ms", "span_id", "outline"],
        )
        .properties(height=alt.Step(20))
    )
    return cast(alt.Chart, _svg(chart))


def retries_against_budget(frame: pd.DataFrame) -> alt.FacetChart:
    """Per service: retries per minute (bars) against the retry budget (dashed line),
    over shaded buckets in which calls found the circuit breaker open."""
    tooltip = [
        alt.Tooltip("utcyearmonthdatehoursminutesseconds(bucket):T", title="bucket"),
        "service",
        alt.Tooltip("retries_per_min:Q", format=".1f", title="retries / min"),
        alt.Tooltip("budget_per_min:Q", format=".1f", title="budget / min"),
        "refused",
        "failed_fast",
    ]
    base = alt.Chart().encode(x=_time_x(frame))
    open_periods = (
        base.transform_filter(alt.datum.saw_open > 0)
        .mark_rect(color="#D55E00", opacity=0.15)
        .encode(x2="bucket_end:T")
    )
    retries = base.mark_bar(color="#E69F00").encode(
        y=alt.Y("retries_per_min:Q", title="retries / min"), tooltip=tooltip
    )
    budget = base.mark_line(color="#000000", strokeDash=[4, 3]).encode(
        y="budget_per_min:Q", tooltip=tooltip
    )
    chart = (
        alt.layer(open_periods, retries, budget, data=frame)
        .facet(row=alt.Row("service:N", title=None))
        .resolve_scale(y="independent")
    )
    return cast(alt.FacetChart, _svg(chart))
