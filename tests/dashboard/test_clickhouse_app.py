"""The dashboard's five pages on a ClickHouse source under Streamlit's AppTest
(embedded chDB in this process, as the Streamlit server holds it): no exception,
the figures of the DuckDB path, the findings shown; and a source's password
never on a page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.clickhouse_backend import Backend, unique
from tests.services import free_port
from toolspan.dashboard import _ui, open_database
from toolspan.dashboard._clickhouse import SourceSpec
from toolspan.dashboard._env import SOURCE_ENV
from toolspan.dashboard._queries import Filters, run_query

from .clickhouse_sources import SAMPLES, WRITE_TOOLS, drop, load_chdb, load_duckdb

clickhouse_connect = pytest.importorskip("clickhouse_connect")
pytest.importorskip("chdb")

APP = Path(__file__).parents[2] / "dashboard" / "app.py"
PAGES = ("overview", "timelines", "findings", "trace", "console")
DATABASE = "d_app"
TRACES = [SAMPLES / "agent_run"]


@pytest.fixture(scope="module")
def source(clickhouse: Backend) -> Iterator[str]:
    name = unique(DATABASE)
    loader = clickhouse.client()
    try:
        load_chdb(loader, name, TRACES)
    finally:
        loader.close()
    yield clickhouse.source(name)
    drop(clickhouse, name)


@pytest.fixture
def app_env(source: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(_ui.DB_ENV, raising=False)
    monkeypatch.setenv(SOURCE_ENV, SourceSpec(source, write_tools=WRITE_TOOLS).to_env())
    yield


def _start(page: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60).run()
    if page != "overview":
        app.switch_page(f"_pages/{page}.py").run()
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]
    return app


@pytest.mark.usefixtures("app_env")
def test_every_page_runs_on_a_chdb_source(tmp_path: Path) -> None:
    duck = open_database(load_duckdb(tmp_path / "traces.duckdb", TRACES))
    totals = run_query(duck, "overview_totals", Filters().params()).iloc[0]
    apps = {page: _start(page) for page in PAGES}
    overview = {m.label: m.value for m in apps["overview"].metric}
    assert overview["Calls"] == f"{int(totals['calls']):,}"
    assert overview["Retries"] == f"{int(totals['retries']):,}"
    findings = {m.label: m.value for m in apps["findings"].metric}
    assert int(findings["duplicate write"]) > 0
    # The console runs on the source's guarded session.
    console = apps["console"]
    console.text_area[0].set_value("SELECT count() AS n FROM tool_calls")
    console.button[-1].click().run()
    assert not console.exception
    assert int(console.dataframe[0].value["n"].iloc[0]) == int(totals["calls"])
    console.text_area[0].set_value("SELECT * FROM file('/etc/passwd', 'LineAsString')")
    console.button[-1].click().run()
    assert [e.value for e in console.error] == ["Refused"]


def test_a_source_password_is_never_on_the_page_or_in_a_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "pw-4f1a9c"
    source = f"clickhouse://alice:{secret}@127.0.0.1:{free_port()}/otel"
    monkeypatch.delenv(_ui.DB_ENV, raising=False)
    monkeypatch.setenv(SOURCE_ENV, SourceSpec(source).to_env())
    app = AppTest.from_file(APP, default_timeout=60).run()
    assert not app.exception
    shown = [e.value for e in app.error]
    assert shown and "cannot open" in shown[0] and "127.0.0.1" in shown[0]
    for kind in ("error", "exception", "text", "code", "markdown", "caption", "info", "warning"):
        assert all(secret not in str(element.proto) for element in app.get(kind)), kind
    assert secret not in caplog.text
