"""Every page under Streamlit's AppTest: no exception, and the figures shown
equal SQL run on the same database (and the scenario the traces were built from)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from toolspan.dashboard import _ui, open_database
from toolspan.dashboard._queries import window_start

from .conftest import ingest
from .traces import BASE_NS, Conversation, scenario, write_traces

APP = Path(__file__).parents[2] / "dashboard" / "app.py"
PAGES = ("timelines", "findings", "trace", "console")


@pytest.fixture(scope="module")
def sql(fixture_db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    # Same configuration as the app: DuckDB shares one instance per file.
    connection = open_database(fixture_db)
    yield connection


def one(connection: duckdb.DuckDBPyConnection, query: str, *params: Any) -> Any:
    return connection.execute(query, list(params)).fetchone()[0]  # type: ignore[index]


def start(db: Path, monkeypatch: pytest.MonkeyPatch, page: str | None = None) -> AppTest:
    monkeypatch.setenv(_ui.DB_ENV, str(db))
    app = AppTest.from_file(APP, default_timeout=30).run()
    if page is not None:
        app.switch_page(f"_pages/{page}.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def charts(app: AppTest) -> list[pd.DataFrame]:
    """The data behind every Vega-Lite chart on the page."""
    frames = []
    for chart in app.get("vega_lite_chart"):
        proto: Any = chart.proto
        frames.extend(convert_arrow_bytes_to_pandas_df(d.data.data) for d in proto.datasets)
    return frames


# -- overview ---------------------------------------------------------------


def test_overview_figures_equal_sql_and_scenario(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch)
    shown = metrics(app)
    calls = [call for conv in scenario() for call in conv.calls]
    # Retries and waits from the attempts view, not the call attributes the page reads.
    retries = one(sql, "SELECT count(*) FROM attempts WHERE attempt > 1")
    wait = one(sql, "SELECT sum(delay_s) FROM attempts")
    succeeded = one(sql, "SELECT count(*) FROM tool_calls WHERE status = 'succeeded'")
    assert shown["Calls"] == f"{len(calls):,}" == f"{one(sql, 'SELECT count(*) FROM tool_calls'):,}"
    assert retries == sum(max(len(c.attempts) - 1, 0) for c in calls) == 4
    assert shown["Retries"] == str(retries)
    assert shown["Scheduled wait"] == f"{wait:,.2f} s" == "2.25 s"
    assert shown["Success rate"] == f"{succeeded / len(calls):.1%}"
    assert shown["Conversations"] == str(len(scenario()))


def test_overview_chart_is_status_by_tool(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch)
    by_tool, over_time = charts(app)
    expected = sql.execute(
        "SELECT tool, status, count(*) FROM tool_calls GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    shown = sorted(zip(by_tool["tool"], by_tool["status"], by_tool["calls"], strict=True))
    assert shown == expected
    assert int(over_time["calls"].sum()) == one(sql, "SELECT count(*) FROM tool_calls")


def test_tool_and_status_filters_apply(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch)
    app.sidebar.multiselect(key="f_tools").set_value(["fetch_weather", "search_docs"]).run()
    expected = one(
        sql, "SELECT count(*) FROM tool_calls WHERE tool IN ('fetch_weather', 'search_docs')"
    )
    assert metrics(app)["Calls"] == str(expected) == "4"
    app.sidebar.multiselect(key="f_statuses").set_value(["succeeded"]).run()
    assert metrics(app)["Calls"] == "2"
    assert metrics(app)["Retries"] == "2"  # search_docs: 503, 503, ok


def test_conversation_filter_applies_to_every_page(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch)
    app.sidebar.selectbox(key=_ui.CONVERSATION_KEY).set_value("conv-loop").run()
    assert metrics(app)["Calls"] == str(
        one(sql, "SELECT count(*) FROM tool_calls WHERE conversation_id = 'conv-loop'")
    )
    app.switch_page("_pages/findings.py").run()
    assert metrics(app)["duplicate write"] == "0"
    assert metrics(app)["loop"] == "1"


def test_time_range_filter(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch)
    slider = app.sidebar.slider(key="f_time")
    low, high = slider.value
    cut = low + timedelta(seconds=3000)  # conv-dup (at 3600 s) after, the others before
    slider.set_value((cut, high)).run()
    expected = one(sql, "SELECT count(*) FROM tool_calls WHERE start_time >= ?", cut)
    assert metrics(app)["Calls"] == str(expected) == "4"


# -- retry timelines --------------------------------------------------------


def test_timelines_one_bar_per_attempt_labelled_with_status(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch, "timelines")
    (ran,) = [frame for frame in charts(app) if "attempt" in frame.columns]
    expected = sql.execute(
        "SELECT c.tool, a.attempt, a.outcome FROM attempts a JOIN tool_calls c "
        "ON c.span_id = a.call_span_id AND c.trace_id = a.trace_id "
        "WHERE c.attempts > 1 OR c.status <> 'succeeded' ORDER BY ALL"
    ).fetchall()
    shown = sorted(
        (label.split(" · ")[0].split(". ", 1)[1], int(n), outcome)
        for label, n, outcome in zip(ran["label"], ran["attempt"], ran["outcome"], strict=True)
    )
    assert shown == expected
    labels = set(ran["label"])
    # The early stop: one short bar, its label says why.
    assert any("→ wait_budget (http_429), server asked 120 s" in label for label in labels)
    assert any("→ attempt_limit" in label for label in labels)
    # A bar is the attempt's time plus its scheduled delay.
    first = ran[(ran["attempt"] == 1) & (ran["outcome"] == "http_503")].iloc[0]
    assert first["wait_end_ms"] - first["end_ms"] == pytest.approx(500.0)
    assert first["end_ms"] - first["start_ms"] == pytest.approx(200.0)


def test_timelines_all_calls_toggle(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch, "timelines")
    app.toggle[0].set_value(False).run()
    table = app.dataframe[0].value
    assert len(table) == one(sql, "SELECT count(*) FROM tool_calls")


# -- findings ---------------------------------------------------------------


def test_findings_counts_equal_sql_and_open_trace(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch, "findings")
    shown = metrics(app)
    for kind, count in sql.execute("SELECT kind, count(*) FROM findings GROUP BY kind").fetchall():
        assert shown[kind.replace("_", " ")] == str(count)
    assert shown["duplicate write"] == "1"
    assert int(shown["loop"]) >= 1
    table = app.dataframe[0].value
    assert len(table) == one(sql, "SELECT count(*) FROM findings")
    duplicate = list(table["kind"]).index("duplicate_write")
    app.selectbox(key="finding").set_value(duplicate).run()
    calls = app.dataframe[1].value
    expected = sql.execute(
        "SELECT unnest(span_ids) FROM findings WHERE kind = 'duplicate_write'"
    ).fetchall()
    assert sorted(calls["span_id"]) == sorted(row[0] for row in expected)
    assert set(calls["status"]) == {"succeeded"} and not calls["replayed"].any()
    trace_id = one(sql, "SELECT trace_ids[1] FROM findings WHERE kind = 'duplicate_write'")
    app.button(key=f"open_trace-{trace_id}").click().run()
    assert not app.exception
    assert app.title[0].value == "Trace view"
    assert app.selectbox(key="trace").value == trace_id


# -- trace view -------------------------------------------------------------


def test_trace_waterfall_shows_every_span_of_the_trace(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch, "trace")
    trace_id = app.selectbox(key="trace").value
    (waterfall,) = charts(app)
    expected = sql.execute(
        "SELECT span_id, name FROM spans WHERE trace_id = ? ORDER BY ALL", [trace_id]
    ).fetchall()
    assert sorted(zip(waterfall["span_id"], waterfall["name"], strict=True)) == expected
    categories = set(waterfall["category"])
    assert {"agent", "model", "tool", "attempt"} <= categories


def test_trace_turn_scope_and_attributes(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch, "trace")
    trace_id = one(
        sql, "SELECT trace_id FROM tool_calls WHERE conversation_id = 'conv-retry' LIMIT 1"
    )
    app.selectbox(key="trace").set_value(trace_id).run()
    app.selectbox(key=f"scope-{trace_id}").set_value(("turn", "conv-retry-turn-1")).run()
    (waterfall,) = charts(app)
    # The turn: its model span, its call with three attempts, and the agent span above.
    assert sorted(waterfall["category"]) == [
        "agent",
        "attempt",
        "attempt",
        "attempt",
        "model",
        "tool",
    ]
    call_span = waterfall.loc[waterfall["category"] == "tool", "span_id"].iloc[0]
    app.selectbox(key=f"span-{trace_id}-turn-conv-retry-turn-1").set_value(call_span).run()
    shown = json.loads(app.json[0].value)
    assert shown["name"] == "execute_tool search_docs"
    assert shown["attributes"]["toolspan.status"] == "succeeded"
    assert shown["attributes"]["toolspan.attempts"] == "3"


# -- SQL console ------------------------------------------------------------


def run_console(app: AppTest, query: str) -> AppTest:
    app.text_area(key="console_sql").set_value(query)
    app.button[-1].click().run()  # the form's Run button
    assert not app.exception
    return app


def test_console_result_equals_sql(
    fixture_db: Path, sql: duckdb.DuckDBPyConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch, "console")
    query = "SELECT tool, count(*) AS calls FROM tool_calls GROUP BY tool ORDER BY tool"
    run_console(app, query)
    shown = app.dataframe[0].value
    assert list(shown.itertuples(index=False, name=None)) == sql.execute(query).fetchall()
    assert app.get("download_button")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "cannot read or write files"),
        ("COPY tool_calls TO '/tmp/toolspan-console.csv'", "only reads"),
        ("SET enable_external_access = true", "only reads"),
        ("SELEC 1", "syntax error"),
    ],
)
def test_console_refusals_are_messages(
    fixture_db: Path, monkeypatch: pytest.MonkeyPatch, query: str, message: str
) -> None:
    app = run_console(start(fixture_db, monkeypatch, "console"), query)
    assert app.error[0].value in {"Refused", "The query failed"}
    assert message in app.code[0].value  # DuckDB's text, shown as plain text


def test_console_time_limit(fixture_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_ui.TIME_LIMIT_ENV, "0.3")
    app = run_console(
        start(fixture_db, monkeypatch, "console"),
        "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b",
    )
    assert "Stopped after 0.3 s" in app.warning[0].value


def test_console_starts_from_filters(fixture_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = start(fixture_db, monkeypatch, "console")
    app.sidebar.multiselect(key="f_tools").set_value(["send_email"]).run()
    app.button(key="from_filters").click().run()
    run_console(app, app.text_area(key="console_sql").value)
    shown = app.dataframe[0].value
    assert len(shown) == 3 and set(shown["tool"]) == {"send_email"}


# -- nothing to show --------------------------------------------------------


@pytest.mark.parametrize("page", [None, "timelines", "findings", "trace"])
def test_empty_database_gets_a_message(
    empty_db: Path, monkeypatch: pytest.MonkeyPatch, page: str | None
) -> None:
    app = start(empty_db, monkeypatch, page)
    assert "no spans yet" in app.info[0].value


@pytest.mark.parametrize("page", [None, "timelines", "findings", "trace"])
def test_database_without_tool_spans_gets_a_message(
    chat_only_db: Path, monkeypatch: pytest.MonkeyPatch, page: str | None
) -> None:
    app = start(chat_only_db, monkeypatch, page)
    assert "but no tool spans" in app.info[0].value


def test_console_works_without_tool_spans(
    chat_only_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = run_console(
        start(chat_only_db, monkeypatch, "console"), "SELECT count(*) AS n FROM spans"
    )
    # write_chat_only: three conversations, an agent span each and no turn.
    assert app.dataframe[0].value["n"].tolist() == [3]


def test_missing_or_foreign_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = start(tmp_path / "nope.duckdb", monkeypatch)
    assert "no database at" in app.error[0].value
    foreign = tmp_path / "foreign.duckdb"
    duckdb.connect(str(foreign)).close()
    app = start(foreign, monkeypatch)
    assert "no toolspan views" in app.error[0].value


def test_last_minutes_window_follows_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Calls two minutes and two hours before now (the real clock the app reads):
    # "last 15 minutes" keeps only the first, "last 24 hours" both, and the
    # range slider is not drawn while a window is chosen.
    now_s = int(time.time() - BASE_NS / 10**9)
    recent, older = scenario()[0], scenario()[1]
    convs = [
        Conversation("recent", now_s - 120, list(recent.calls)),
        Conversation("older", now_s - 7200, list(older.calls)),
    ]
    db = ingest(tmp_path / "window.duckdb", write_traces(tmp_path / "w.jsonl", convs))
    app = start(db, monkeypatch)
    assert metrics(app)["Calls"] == str(len(recent.calls) + len(older.calls))
    app.sidebar.selectbox(key=_ui.WINDOW_KEY).set_value("Last 15 minutes").run()
    assert not app.exception, [e.value for e in app.exception]
    assert metrics(app)["Calls"] == str(len(recent.calls))
    assert not [s for s in app.sidebar.slider if s.key == "f_time"]
    app.sidebar.selectbox(key=_ui.WINDOW_KEY).set_value("Last 24 hours").run()
    assert metrics(app)["Calls"] == str(len(recent.calls) + len(older.calls))


def test_window_start_is_naive_utc_to_the_second() -> None:
    now = datetime(2026, 12, 2, 10, 30, 15, 999_999, tzinfo=UTC)
    assert window_start(15, now) == datetime(2026, 12, 2, 10, 15, 15)
