"""Streamlit glue shared by the app and its pages: connection, cached queries, filters.

The app process gets its database path from ``TOOLSPAN_DASHBOARD_DB`` (set by
``toolspan dashboard``). Query results are cached per query name and
parameters; the database is opened read-only, so they never go stale.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

import duckdb
import pandas as pd
import streamlit as st

from ..analyzer._render import coverage_line as _coverage_text
from . import _live
from ._clickhouse import ClickHouseDatabase, ClickHouseSandbox, SourceSpec
from ._env import DB_ENV, SOURCE_ENV, STORE_ENV, TIME_LIMIT_ENV
from ._errors import DashboardError
from ._quarantines import QuarantineStoreError, load, store_location
from ._queries import Filters, bucket_for, coverage, run_query, window_start
from ._sandbox import SandboxLimits, SqlSandbox, open_database

__all__ = [
    "DB_ENV",
    "connection",
    "coverage_line",
    "current_filters",
    "limits",
    "quarantines",
    "query",
    "render_sidebar",
    "require_calls",
    "sandbox",
    "slider_format",
    "stop_with",
]

ALL_CONVERSATIONS = "(all conversations)"
# The time filter: a range picked on the slider, or the last N minutes up to
# now, which moves with the clock (in live mode the page runs again as it moves).
PICK_RANGE = "Pick a range"
WINDOWS: dict[str, int | None] = {
    PICK_RANGE: None,
    "Last 5 minutes": 5,
    "Last 15 minutes": 15,
    "Last hour": 60,
    "Last 24 hours": 24 * 60,
}
WINDOW_KEY = "f_window"
CONVERSATION_KEY = "filter_conversation"
TRACE_KEY = "trace"


def stop_with(message: str, *, info: bool = False) -> NoReturn:
    """Show ``message`` instead of the page and stop the script run."""
    (st.info if info else st.error)(message)
    st.stop()
    raise AssertionError("unreachable: st.stop() raises")  # pragma: no cover


def limits() -> SandboxLimits:
    """The sandbox limits, with the time limit overridable from the environment."""
    seconds = float(os.environ.get(TIME_LIMIT_ENV, SandboxLimits.time_limit_s))
    return SandboxLimits(time_limit_s=seconds)


def _db_path() -> str:
    """The database file, or the ClickHouse source (``SOURCE_ENV``'s JSON, with
    ``_SOURCE_PREFIX``): the key the connection and the query cache go by."""
    source = os.environ.get(SOURCE_ENV)
    if source:
        return _SOURCE_PREFIX + source
    path = _live.snapshot_path() or os.environ.get(DB_ENV)
    if not path:
        stop_with(f"No database given: start the app with `toolspan dashboard` (or set {DB_ENV}).")
    return path


_SOURCE_PREFIX = "clickhouse-source:"


# Live mode opens each newer copy of the database: keep only the last few.
# A ClickHouse source is opened once per process (chDB: one engine per process).
@st.cache_resource(show_spinner=False, max_entries=4)
def _open(path: str) -> duckdb.DuckDBPyConnection | ClickHouseDatabase:
    if path.startswith(_SOURCE_PREFIX):
        spec = SourceSpec.from_env(path.removeprefix(_SOURCE_PREFIX))
        return ClickHouseDatabase(spec, limits())
    return open_database(Path(path), limits())


def sandbox() -> SqlSandbox | ClickHouseSandbox:
    """The SQL console's runner on the app's connection."""
    database = connection()
    if isinstance(database, ClickHouseDatabase):
        return ClickHouseSandbox(database, limits())
    return SqlSandbox(database, limits())


def connection() -> duckdb.DuckDBPyConnection | ClickHouseDatabase:
    """The app's one read-only, locked-down DuckDB connection (or guarded
    ClickHouse session)."""
    try:
        return _open(_db_path())
    except DashboardError as exc:
        stop_with(str(exc))


def _generation() -> int:
    """The cache key of the data: a ClickHouse source's analysis is built again
    as spans arrive (its generation); a DuckDB file's is 0."""
    database = connection()
    return database.generation if isinstance(database, ClickHouseDatabase) else 0


@st.cache_data(show_spinner=False, max_entries=512)
def _cached(path: str, generation: int, name: str, params: dict[str, Any]) -> pd.DataFrame:
    # generation: a ClickHouse source's analysis, built again as spans arrive.
    return run_query(_open(path), name, params)


def query(name: str, **params: Any) -> pd.DataFrame:
    """Run the named page query (cached on its parameters); stop the page on error."""
    try:
        return _cached(_db_path(), _generation(), name, params)
    except DashboardError as exc:
        stop_with(str(exc))


@st.cache_data(show_spinner=False, max_entries=16)
def _cached_coverage(path: str, generation: int) -> dict[str, Any]:
    return coverage(_open(path))


def coverage_line() -> str:
    """The analyzer's coverage of the whole database in one line of plain text
    (docs/analyzer.md#coverage): spans read, GenAI-looking spans, tool calls per
    source, calls whose arguments were not recorded. Only figures and the
    analyzer's own source names: nothing from a trace."""
    try:
        return _coverage_text(_cached_coverage(_db_path(), _generation()))
    except DashboardError as exc:
        stop_with(str(exc))


def filtered(name: str, **extra: Any) -> pd.DataFrame:
    """Run the named query with the sidebar filters plus ``extra`` parameters."""
    return query(name, **current_filters().params(), **extra)


def current_filters() -> Filters:
    """The filters the sidebar set on this run (all data before the sidebar ran)."""
    value = st.session_state.get("filters")
    return value if isinstance(value, Filters) else Filters()


def require_calls() -> None:
    """Stop the page with a clear message when there is nothing to show."""
    bounds = query("filter_bounds").iloc[0]
    if int(bounds["spans"]) == 0:
        stop_with(
            "This database holds no spans yet: ingest trace files with "
            "`toolspan analyze PATH --db FILE` or start `toolspan dashboard PATH`.",
            info=True,
        )
    if int(bounds["calls"]) == 0:
        # The coverage says whether GenAI spans came whose calls were not
        # recognised (a silent zero, issue 39) or nothing GenAI at all.
        stop_with(
            f"This database holds {int(bounds['spans']):,} spans but no tool spans "
            "(`execute_tool` spans, OpenInference TOOL spans): nothing to show here. "
            f"Coverage: {coverage_line()}; see docs/analyzer.md#coverage. "
            "The SQL console still works.",
            info=True,
        )


def render_sidebar() -> Filters:
    """Draw the filters in the sidebar, remember them for the pages, return them."""
    bounds = query("filter_bounds").iloc[0]
    st.sidebar.header("Filters")
    start, end = _time_filter(bounds["first_call"], bounds["last_call"])
    conversation = _conversation_filter(list(bounds["conversations"]))
    tools = st.sidebar.multiselect("Tool", list(bounds["tools"]), key="f_tools")
    statuses = st.sidebar.multiselect("Final status", list(bounds["statuses"]), key="f_statuses")
    filters = Filters(start, end, conversation, tuple(tools), tuple(statuses))
    st.session_state["filters"] = filters
    return filters


def _time_filter(first: Any, last: Any) -> tuple[datetime | None, datetime | None]:
    window = st.sidebar.selectbox(
        "Time",
        list(WINDOWS),
        key=WINDOW_KEY,
        help="The last N minutes follow the clock: under `toolspan serve` the pages move with it.",
    )
    minutes = WINDOWS.get(str(window))
    if minutes is None:
        _live.watch_window(None)
        return _time_range(first, last)
    start = window_start(minutes)
    _live.watch_window((start, minutes))
    st.sidebar.caption(f"Calls since {start:%Y-%m-%d %H:%M:%S} UTC")
    return start, None


def _time_range(first: Any, last: Any) -> tuple[datetime | None, datetime | None]:
    if pd.isna(first) or pd.isna(last) or first == last:
        return None, None
    low = pd.Timestamp(first).floor("s").to_pydatetime()
    high = pd.Timestamp(last).ceil("s").to_pydatetime()
    step = max(timedelta(seconds=1), bucket_for(low, high) / 10)
    label, value_format = slider_format(low, high)
    chosen = st.sidebar.slider(
        label,
        min_value=low,
        max_value=high,
        value=(low, high),
        step=step,
        format=value_format,
        key="f_time",
    )
    picked_low, picked_high = chosen
    # The full range is no filter at all: calls on the edges stay in.
    return (
        None if picked_low <= low else picked_low,
        None if picked_high >= high else picked_high,
    )


def slider_format(low: datetime, high: datetime) -> tuple[str, str]:
    """The time slider's label and value format (moment.js) for ``low..high``.

    Streamlit centres a value on its thumb and, on first draw, lets a value at
    either end spill out of the sidebar: values stay short (at most 11
    characters, which fit in the sidebar's padding at 1280 px) and the date or
    year they leave out goes into the label.
    """
    if low.date() == high.date():
        return f"Time range (call start, UTC, {low:%Y-%m-%d})", "HH:mm:ss"
    if low.year == high.year:
        return f"Time range (call start, UTC, {low:%Y})", "MM-DD HH:mm"
    return "Time range (call start, UTC)", "YYYY-MM-DD"


def _conversation_filter(recent: list[str]) -> str | None:
    options = [ALL_CONVERSATIONS, *recent]
    chosen = st.session_state.get(CONVERSATION_KEY)
    if chosen and chosen not in options:
        options.append(chosen)  # opened from a finding, or typed in
    value = st.sidebar.selectbox(
        "Conversation",
        options,
        key=CONVERSATION_KEY,
        accept_new_options=True,
        help="The 500 most recent are listed; type any other conversation id.",
    )
    return None if value in (None, "", ALL_CONVERSATIONS) else str(value)


def open_conversation(conversation_id: str) -> None:
    """Button callback: filter every page to one conversation."""
    st.session_state[CONVERSATION_KEY] = conversation_id


def open_trace(trace_id: str) -> None:
    """Button callback: show this trace in the trace view."""
    st.session_state[TRACE_KEY] = trace_id


def quarantines() -> tuple[str, pd.DataFrame]:
    """The configured store and its quarantines in force; stop the page with
    how to configure one when there is none, or why it failed when it fails."""
    location = store_location()
    if location is None:
        stop_with(
            "No quarantine store given: start the dashboard with `toolspan dashboard ... "
            f"--store URL` (a redis:// URL or a SQLite file), set {STORE_ENV}, or run "
            "`toolspan serve --enforce STORE`, which passes its store on.",
            info=True,
        )
    try:
        return location, load(location)
    except QuarantineStoreError as exc:
        stop_with(str(exc))
