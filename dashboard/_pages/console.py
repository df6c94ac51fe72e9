"""SQL console: the user's SQL over the analyzer's views, in the sandbox."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from toolspan.dashboard import (
    DashboardError,
    QueryMemoryExceeded,
    QueryRefused,
    QueryTimeout,
    ResultTooLarge,
    ui,
)

DEFAULT_SQL = (
    "SELECT tool, status, count(*) AS calls, sum(attempts) AS attempts\n"
    "FROM tool_calls\nGROUP BY ALL\nORDER BY calls DESC"
)
SQL_KEY = "console_sql"


def _literal(value: object) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def filters_as_sql(filters: ui.Filters) -> str:
    """A starting query over ``tool_calls`` with the sidebar filters written out."""
    conditions = []
    if filters.start is not None:
        conditions.append(f"start_time >= TIMESTAMP {_literal(filters.start)}")
    if filters.end is not None:
        conditions.append(f"start_time <= TIMESTAMP {_literal(filters.end)}")
    if filters.conversation:
        conditions.append(f"conversation_id = {_literal(filters.conversation)}")
    for column, values in (("tool", filters.tools), ("status", filters.statuses)):
        if values:
            conditions.append(f"{column} IN ({', '.join(_literal(v) for v in values)})")
    where = "\nWHERE " + "\n  AND ".join(conditions) if conditions else ""
    return f"SELECT *\nFROM tool_calls{where}\nORDER BY start_time\nLIMIT 100"


def _start_from_filters() -> None:
    st.session_state[SQL_KEY] = filters_as_sql(ui.current_filters())


def _schema() -> None:
    with st.expander("Views and columns"):
        sandbox = ui.sandbox()
        for view in sandbox.views:
            try:
                described = sandbox.describe(view)
            except DashboardError:
                continue
            st.text(f"{view}: " + ", ".join(f"{row[0]} {row[1]}" for row in described.rows))


# What each failure is called; the message itself (DuckDB's, which quotes the
# query and stored values) is shown as plain text, never Markdown.
_HEADINGS: tuple[tuple[type[DashboardError], str], ...] = (
    (QueryRefused, "Refused"),
    (ResultTooLarge, "Result too large"),
    (QueryMemoryExceeded, "The query used too much memory"),
    (DashboardError, "The query failed"),
)


def _show_error(exc: DashboardError) -> None:
    heading = next(text for kind, text in _HEADINGS if isinstance(exc, kind))
    st.error(heading)
    st.code(str(exc), language=None, wrap_lines=True)


def render() -> None:
    st.title("SQL console")
    sandbox = ui.sandbox()
    limits = sandbox.limits
    st.caption(
        f"Read-only {sandbox.engine} over the analyzer's views. No files, network, settings or "
        f"extensions; queries stop after {limits.time_limit_s:g} s or "
        f"{limits.max_process_mb:,} MB of memory and show at most {limits.max_rows:,} rows "
        f"or {ui.human_size(limits.max_result_bytes)}. The sidebar filters do not apply to "
        "your SQL: start from them with the button below."
    )
    _schema()
    st.session_state.setdefault(SQL_KEY, DEFAULT_SQL)
    st.button("Start from the current filters", on_click=_start_from_filters, key="from_filters")
    with st.form("console"):
        sql = st.text_area("SQL", key=SQL_KEY, height=180)
        submitted = st.form_submit_button("Run")
    if not submitted:
        return
    try:
        result = sandbox.run(sql)
    except QueryTimeout as exc:
        st.warning(str(exc))  # the console's own text: only the limit's figure in it
        return
    except DashboardError as exc:
        _show_error(exc)
        return
    frame = pd.DataFrame.from_records(result.rows, columns=result.columns)
    more = f" (first {limits.max_rows:,}; the result has more)" if result.truncated else ""
    st.caption(f"{len(frame):,} rows{more} in {result.elapsed_s:.3f} s")
    st.dataframe(frame, hide_index=True)
    st.download_button(
        "Download CSV", frame.to_csv(index=False), file_name="toolspan-query.csv", mime="text/csv"
    )


render()
