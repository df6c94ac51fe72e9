"""Live mode: follow the database ``toolspan serve`` publishes, or a
ClickHouse source as spans arrive in it.

``toolspan serve`` keeps copying its database into a directory for the
dashboard (DuckDB lets no other process read a file while one writes it) and
writes ``status`` there: the newest copy, when data last arrived, the rate,
the findings seen since it started. With ``TOOLSPAN_DASHBOARD_LIVE`` set to
that directory the app opens the newest copy, checks every few seconds for a
newer one (and then runs again, without a reload), shows when data last
arrived and marks the findings that appeared since the page was opened.
On a ClickHouse source (``toolspan dashboard --source``) the app follows the
collector's table itself, whoever writes it: every ``--follow`` seconds it
counts its rows and, when spans arrived, builds the analysis again
(:meth:`ClickHouseDatabase.refresh`) and runs the page again on it.
Nothing here renders trace text as Markdown or HTML: it goes through
``st.text``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import streamlit as st

from ._clickhouse import ClickHouseDatabase
from ._env import LIVE_ENV
from ._errors import DashboardError
from ._queries import window_start

__all__ = ["follow", "snapshot_path", "watch_window"]

REFRESH_S = 2.0
# A "last N minutes" filter is moved on (the page run again) at least this
# often, also when no data arrives, so that calls leave the window as it passes.
WINDOW_STEP = timedelta(seconds=10)
_WINDOW_KEY = "live_window"
_OPENED_KEY = "live_opened_at"
_VERSION_KEY = "live_version"
_GENERATION_KEY = "live_generation"
_TRACE_PARAM = "trace"


def _status() -> dict[str, Any] | None:
    directory = os.environ.get(LIVE_ENV)
    if not directory:
        return None
    try:
        value = orjson.loads((Path(directory) / "status").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def snapshot_path() -> str | None:
    """The newest database copy in live mode, else None."""
    status = _status()
    if status is None:
        return None
    name = status.get("snapshot")
    if not isinstance(name, str):
        return str(Path(os.environ[LIVE_ENV]) / "not-yet-published.duckdb")
    return str(Path(os.environ[LIVE_ENV]) / Path(name).name)


def follow(trace_key: str, database: object = None) -> None:
    """In live mode: the live line at the top of every page, refreshed by itself."""
    if isinstance(database, ClickHouseDatabase):
        if database.spec.follow_s > 0:
            _source_line(database)
        return
    if _status() is None:
        return
    st.session_state.setdefault(_OPENED_KEY, datetime.now(UTC).isoformat())
    # A webhook alert links to ?trace=ID: open that trace in the trace view.
    wanted = st.query_params.get(_TRACE_PARAM)
    if wanted and st.session_state.get(trace_key) is None:
        st.session_state[trace_key] = wanted
    _live_line()


@st.fragment(run_every=REFRESH_S)
def _live_line() -> None:
    status = _status() or {}
    version = status.get("version")
    shown = st.session_state.get(_VERSION_KEY)
    st.session_state[_VERSION_KEY] = version
    if shown is not None and version != shown:
        st.rerun()  # the whole app, on the newer copy
    if _window_moved():
        st.rerun()  # calls may have left the window
    st.caption(_arrival(status))
    opened = str(st.session_state.get(_OPENED_KEY, ""))
    new = [f for f in status.get("new_findings") or () if str(f.get("seen_at", "")) >= opened]
    if new:
        st.warning(f"{len(new)} new finding(s) since this page was opened")
        st.text("\n".join(_finding_line(f) for f in reversed(new[-20:])))


@st.fragment(run_every=REFRESH_S)
def _source_line(database: ClickHouseDatabase) -> None:
    try:
        database.refresh()
    except DashboardError as exc:
        # The analysis stays as it was; the reason is shown, the next look retries.
        st.text(f"Live: could not build the analysis again: {exc}")
    shown = st.session_state.get(_GENERATION_KEY)
    st.session_state[_GENERATION_KEY] = database.generation
    if shown is not None and database.generation != shown:
        st.rerun()  # the whole app, on the new analysis
    if _window_moved():
        st.rerun()
    ago = max(0, round(database.age_s()))
    st.text(
        f"Live: {database.source_rows:,} spans in {database.session.table} · analysis built "
        f"{ago} s ago in {database.build_s:.1f} s · looks for new spans every "
        f"{database.follow_interval_s():.0f} s"
    )


def _window_moved() -> bool:
    """Whether the "last N minutes" window this run drew has moved on a step."""
    window = st.session_state.get(_WINDOW_KEY)
    return window is not None and window_start(window[1]) - window[0] >= WINDOW_STEP


def watch_window(window: tuple[datetime, int] | None) -> None:
    """Remember the "last N minutes" window (its start, N) this run drew, or None."""
    st.session_state[_WINDOW_KEY] = window


def _arrival(status: dict[str, Any]) -> str:
    last = status.get("last_ingest")
    if not last:
        return "Live: no data yet: export to toolspan serve (OTLP on :4317 / :4318)"
    ago = (datetime.now(UTC) - datetime.fromisoformat(str(last))).total_seconds()
    rate = float(status.get("spans_per_s") or 0)
    total = int(status.get("spans_ingested") or 0)
    return (
        f"Live: data last arrived {max(0, round(ago))} s ago · {rate:,.0f} spans/s · "
        f"{total:,} spans since start · refreshes every {REFRESH_S:g} s"
    )


def _finding_line(finding: dict[str, Any]) -> str:
    parts = [
        "NEW",
        str(finding.get("kind")),
        f"tool {finding.get('tool') or '-'}",
        f"conversation {finding.get('conversation_id')}",
    ]
    explanation = str(finding.get("explanation") or "")
    return " · ".join(parts) + (f": {explanation}" if explanation else "")
