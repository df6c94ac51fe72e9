"""The dashboard follows a ClickHouse source: spans the collector inserts after
the app opened are on the pages after the next look (``--follow``), with the
DuckDB path's figures for all the spans; nothing is built again while no span
arrived, or with ``--follow 0``. Embedded chDB; the clock is injected."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from tests.clickhouse_backend import Backend, unique
from toolspan.analyzer import _exporter_table as clickhouse_otel
from toolspan.analyzer._clickhouse import ClickHouseAnalyzer
from toolspan.analyzer._inputs import resolve
from toolspan.dashboard import _ui, open_database
from toolspan.dashboard._clickhouse import ClickHouseDatabase, SourceSpec
from toolspan.dashboard._env import SOURCE_ENV
from toolspan.dashboard._errors import DashboardError
from toolspan.dashboard._queries import Filters, run_query
from toolspan.tracer.testing import FakeClock

from .clickhouse_sources import SAMPLES, WRITE_TOOLS, drop, load_chdb, load_duckdb

clickhouse_connect = pytest.importorskip("clickhouse_connect")
pytest.importorskip("chdb")

APP = Path(__file__).parents[2] / "dashboard" / "app.py"
FIRST = [SAMPLES / "agent_run"]
LATER = [SAMPLES / "bicycle"]


class Collector:
    """The collector's side: a fresh otel_traces and an insert of more spans."""

    def __init__(self, backend: Backend) -> None:
        self.backend, self.database = backend, unique("d_follow")
        self.client = backend.client()
        load_chdb(self.client, self.database, FIRST)

    @property
    def source(self) -> str:
        return self.backend.source(self.database)

    def insert(self, paths: list[Path]) -> None:
        rows = clickhouse_otel.rows_from_files(resolve(paths))
        clickhouse_otel.insert_rows(self.client, rows, f"{self.database}.otel_traces")

    @contextmanager
    def followed(self, **spec: Any) -> Iterator[tuple[ClickHouseDatabase, FakeClock]]:
        """The dashboard's database on this source (``SourceSpec`` fields in
        ``spec``), on a fake clock."""
        clock = FakeClock(1000.0)
        database = ClickHouseDatabase(SourceSpec(self.source, **spec), clock=clock)
        try:
            yield database, clock
        finally:
            database.close()

    def close(self) -> None:
        self.client.close()
        drop(self.backend, self.database, f"v_{self.database}")


@pytest.fixture
def collector(clickhouse: Backend) -> Iterator[Collector]:
    made = Collector(clickhouse)
    try:
        yield made
    finally:
        made.close()


def _calls(database: Any) -> int:
    return int(run_query(database, "overview_totals", Filters().params()).iloc[0]["calls"])


def _duck_calls(tmp_path: Path, paths: list[Path]) -> int:
    duck = open_database(load_duckdb(tmp_path / f"d{len(paths)}.duckdb", paths))
    try:
        return _calls(duck)
    finally:
        duck.close()


@pytest.mark.parametrize("reads", ["raw", "copies"])
def test_spans_that_arrive_are_on_the_pages_after_the_next_look(
    collector: Collector, tmp_path: Path, reads: str
) -> None:
    if reads == "copies":  # init's materialized views copy the later insert
        with ClickHouseAnalyzer(collector.source) as az:
            az.create_views(f"v_{collector.database}")
    with collector.followed(write_tools=WRITE_TOOLS, follow_s=10) as (database, clock):
        assert database.session.copies == (f"v_{collector.database}" if reads == "copies" else None)
        first = _calls(database)
        assert first == _duck_calls(tmp_path, FIRST)
        assert database.build_s > 0 and database.generation == 0
        clock.now += 10
        assert not database.refresh()  # nothing arrived: nothing built again
        collector.insert(LATER)
        clock.now += 5
        assert not database.refresh()  # not yet time to look
        assert _calls(database) == first
        clock.now += 5
        assert database.refresh()
        assert database.generation == 1
        assert _calls(database) == _duck_calls(tmp_path, FIRST + LATER) > first
        clock.now += 10
        assert not database.refresh()
        assert database.generation == 1


def test_follow_zero_keeps_the_analysis_as_opened(collector: Collector) -> None:
    with collector.followed(follow_s=0) as (database, clock):
        first = _calls(database)
        collector.insert(LATER)
        clock.now += 3600
        assert not database.refresh()
        assert _calls(database) == first


def test_the_app_shows_spans_that_arrived(
    collector: Collector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(_ui.DB_ENV, raising=False)
    # The real clock: follow_s is tiny, a look waits for three builds' time.
    spec = SourceSpec(collector.source, write_tools=WRITE_TOOLS, follow_s=0.001)
    monkeypatch.setenv(SOURCE_ENV, spec.to_env())
    app = AppTest.from_file(APP, default_timeout=60).run()
    assert not app.exception, [e.value for e in app.exception]
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Calls"] == f"{_duck_calls(tmp_path, FIRST):,}"
    assert any(t.value.startswith("Live: ") and "spans in" in t.value for t in app.text)
    collector.insert(LATER)
    expected = f"{_duck_calls(tmp_path, FIRST + LATER):,}"
    # The next look comes once three builds' time has passed (real time here).
    deadline = time.monotonic() + 60
    while {m.label: m.value for m in app.metric}["Calls"] != expected:
        assert time.monotonic() < deadline, "the new spans never reached the page"
        time.sleep(0.2)
        app.run()
        assert not app.exception, [e.value for e in app.exception]


def test_a_source_that_fails_keeps_the_analysis_and_says_why(collector: Collector) -> None:
    with collector.followed(follow_s=10) as (database, clock):
        first = _calls(database)
        table = f"{collector.database}.otel_traces"
        collector.client.command(f"RENAME TABLE {table} TO {table}_away")
        clock.now += 10
        with pytest.raises(DashboardError, match=r"cannot read .* table otel_traces"):
            database.refresh()
        assert _calls(database) == first  # the pages still read the analysis built
        assert not database.refresh()  # the next look waits its turn
        collector.client.command(f"RENAME TABLE {table}_away TO {table}")
        collector.insert(LATER)
        clock.now += 10
        assert database.refresh()
        assert _calls(database) > first


def test_a_slow_build_spaces_the_looks_out(collector: Collector) -> None:
    # A build that took 5 s: the next look waits 15 s, not follow_s.
    with collector.followed(follow_s=2) as (database, clock):
        database.build_s = 5.0
        assert database.follow_interval_s() == 15
        collector.insert(LATER)
        clock.now += 10
        assert not database.refresh()
        clock.now += 5
        assert database.refresh()
