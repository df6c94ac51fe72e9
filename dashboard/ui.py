"""What a dashboard page is written against: the pages' public surface.

A page is a Streamlit script in ``dashboard/_pages/`` listed in ``app.py``. It
imports this module and ``toolspan.dashboard`` only; everything else in the
dashboard package is private and may change under it::

    from toolspan.dashboard import ui

    ui.require_calls()                              # stop early on an empty database
    totals = ui.filtered("overview_totals").iloc[0]  # sql/overview_totals.sql + sidebar filters
    if not totals["calls"]:
        ui.stop_with("No tool call matches the filters.", info=True)

Data
    ``query(name, **params)`` runs the page query ``name`` (the statement of
    ``dashboard/sql/<name>.sql``) on the app's read-only, sandboxed connection,
    cached on its parameters; ``filtered(name, **extra)`` adds the sidebar's
    ``Filters`` (``current_filters()``). Both stop the page with the error's
    message instead of raising. ``connection()`` and ``limits()`` are for the SQL
    console, which runs user SQL through ``sandbox()``: ``toolspan.dashboard.SqlSandbox``
    on DuckDB, the guarded session's runner on a ClickHouse source.
Flow
    ``stop_with(message)`` shows a message instead of the rest of the page;
    ``require_calls()`` does so when there is nothing to show (with the
    coverage); ``coverage_line()`` is the analyzer's coverage of the database
    in one line of plain text (spans read, GenAI-looking, calls per source).
Drawing
    ``page_offset`` draws a page picker for long lists; the chart builders
    (``status_by_tool``, ``calls_over_time``, ``retries_against_budget``,
    ``timeline``, ``waterfall``) turn
    small, aggregated frames into Altair charts, every status and error code in
    one colour on every page; ``bucket_for`` picks the over-time bucket width;
    ``human_size`` writes a byte count as "32 MiB".
Quarantines
    ``quarantines()`` returns the configured store (``TOOLSPAN_STORE``) and its
    quarantines in force as a frame, or stops the page saying how to configure
    one or why the store failed; ``lift_quarantines(location, ids)`` lifts some
    (every one for ``None``) and raises ``QuarantineStoreError`` when the store
    fails; ``store_label`` writes a location without its credentials.
Links between pages
    ``open_conversation`` and ``open_trace`` are button callbacks that filter
    every page to a conversation or show a trace in the trace view (whose
    selector is keyed ``TRACE_KEY``).

Nothing from a trace is rendered as HTML or Markdown: show trace text with
``st.dataframe``, ``st.code``, ``st.json`` or ``st.text``.
"""

from __future__ import annotations

from ._charts import calls_over_time, retries_against_budget, status_by_tool, timeline, waterfall
from ._pages._paging import page_offset
from ._quarantines import QuarantineStoreError, store_label
from ._quarantines import lift as lift_quarantines
from ._queries import Filters, bucket_for
from ._ui import (
    TRACE_KEY,
    connection,
    coverage_line,
    current_filters,
    filtered,
    limits,
    open_conversation,
    open_trace,
    quarantines,
    query,
    require_calls,
    sandbox,
    stop_with,
)
from ._units import human_size

__all__ = [
    "TRACE_KEY",
    "Filters",
    "QuarantineStoreError",
    "bucket_for",
    "calls_over_time",
    "connection",
    "coverage_line",
    "current_filters",
    "filtered",
    "human_size",
    "lift_quarantines",
    "limits",
    "open_conversation",
    "open_trace",
    "page_offset",
    "quarantines",
    "query",
    "require_calls",
    "retries_against_budget",
    "sandbox",
    "status_by_tool",
    "stop_with",
    "store_label",
    "timeline",
    "waterfall",
]
