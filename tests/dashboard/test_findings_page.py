"""The Findings page with the retry-safety kinds: counts, the kind filter, the
drill-down to the calls and the trace, the explanation shown as plain text."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from tests.analyzer.retry_traces import write_retry_traces
from toolspan.analyzer import FINDING_KINDS
from toolspan.dashboard import _ui, open_database

from .conftest import ingest

APP = Path(__file__).parents[2] / "dashboard" / "app.py"


@pytest.fixture(scope="module")
def retry_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dashboard-retry")
    (root / "traces").mkdir()
    write_retry_traces(root / "traces")
    return ingest(root / "retry.duckdb", root / "traces")


def _findings_page(db: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv(_ui.DB_ENV, str(db))
    app = AppTest.from_file(APP, default_timeout=30).run()
    app.switch_page("_pages/findings.py").run()
    assert not app.exception, [e.value for e in app.exception]
    return app


def test_every_kind_is_counted_like_sql(retry_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _findings_page(retry_db, monkeypatch)
    shown = {m.label: m.value for m in app.metric}
    counts = dict(
        open_database(retry_db)
        .execute("SELECT kind, count(*) FROM findings GROUP BY kind")
        .fetchall()
    )
    assert shown == {kind.replace("_", " "): str(counts.get(kind, 0)) for kind in FINDING_KINDS}
    assert shown["parallel write"] == "2" and shown["retried permanent"] == "2"


def test_filter_to_parallel_writes_and_drill_down(
    retry_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = open_database(retry_db)
    app = _findings_page(retry_db, monkeypatch)
    app.multiselect(key="finding_kinds").set_value(["parallel_write"]).run()
    table = app.dataframe[0].value
    assert set(table["kind"]) == {"parallel_write"} and len(table) == 2
    mixed = [r.startswith("3 writes on resource order-1") for r in table["reason"]].index(True)
    app.selectbox(key="finding").set_value(mixed).run()
    assert not app.exception
    calls = app.dataframe[1].value
    expected = sql.execute(
        "SELECT unnest(span_ids) FROM findings"
        " WHERE kind = 'parallel_write' AND json_extract_string(detail, '$.resource_key') = ?",
        ["order-1"],
    ).fetchall()
    assert sorted(calls["span_id"]) == sorted(row[0] for row in expected)
    assert set(calls["resource_key"]) == {"order-1"}
    assert set(calls["tool"]) == {"refund_order", "cancel_order"}
    # The explanation, as plain text (trace text is never Markdown).
    texts = [t.value for t in app.text]
    assert any(t.startswith("3 writes on resource order-1") for t in texts), texts
    trace_id = sql.execute(
        "SELECT trace_ids[1] FROM findings"
        " WHERE kind = 'parallel_write' AND json_extract_string(detail, '$.resource_key') = ?",
        ["order-1"],
    ).fetchone()
    assert trace_id is not None
    app.button(key=f"open_trace-{trace_id[0]}").click().run()
    assert app.title[0].value == "Trace view"
    assert app.selectbox(key="trace").value == trace_id[0]


def test_kind_filter_shows_only_that_kind(retry_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sql: duckdb.DuckDBPyConnection = open_database(retry_db)
    app = _findings_page(retry_db, monkeypatch)
    for kind in ("key_churn", "write_after_unknown", "retried_permanent"):
        app.multiselect(key="finding_kinds").set_value([kind]).run()
        table = app.dataframe[0].value
        expected = sql.execute("SELECT count(*) FROM findings WHERE kind = ?", [kind]).fetchone()
        assert expected is not None
        assert set(table["kind"]) == {kind} and len(table) == expected[0]
