"""The dashboard on a ClickHouse source: every page query gives the same rows
on embedded chDB (the collector's otel_traces, read in place) as on the
analyzer's DuckDB database, for the same traces, with and without filters; and
the SQL console's sandbox on chDB refuses writes, DDL, settings and every
table function that reaches files, URLs or other servers."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest

from tests.clickhouse_backend import Backend, unique
from toolspan.analyzer._clickhouse import ClickHouseAnalyzer
from toolspan.dashboard import open_database
from toolspan.dashboard._clickhouse import (
    ClickHouseDatabase,
    SourceSpec,
)
from toolspan.dashboard._queries import Filters, coverage, run_query

from .clickhouse_sources import WRITE_TOOLS, drop, load_chdb, load_duckdb, trace_set

clickhouse_connect = pytest.importorskip("clickhouse_connect")
pytest.importorskip("chdb")

SQL = Path(__file__).resolve().parents[2] / "dashboard" / "sql"
PAGE_QUERIES = sorted(
    p.stem for p in SQL.glob("*.sql") if p.stem != "macros" and not p.stem.startswith("clickhouse_")
)


class Engines:
    """One trace set on both engines."""

    def __init__(self, duck: Any, clickhouse: ClickHouseDatabase) -> None:
        self.duck = duck
        self.clickhouse = clickhouse

    def both(self, name: str, params: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        return (
            _rows(run_query(self.duck, name, params)),
            _rows(run_query(self.clickhouse, name, params)),
        )


@pytest.fixture(
    scope="module",
    params=[
        *((name, layout, "raw") for layout in ("map", "json") for name in ("samples", "scenarios")),
        # The tool spans read from `toolspan clickhouse init`'s copies instead.
        ("scenarios", "map", "copies"),
        ("samples", "json", "copies"),
    ],
    ids=lambda p: "-".join(p),
)
def engines(
    request: pytest.FixtureRequest, clickhouse: Backend, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engines]:
    # Both exporter layouts: attributes in a Map(String, String) or a JSON column.
    name, layout, reads = request.param
    root = tmp_path_factory.mktemp(f"dashboard-{name}-{layout}-{reads}")
    paths = trace_set(name, root / "traces")
    duck = open_database(load_duckdb(root / "traces.duckdb", paths))
    database = unique(f"d_{name}_{layout}_{reads}")
    source = clickhouse.source(database)
    views = f"v_{database}" if reads == "copies" else None
    loader = clickhouse.client()
    try:
        load_chdb(loader, database, paths, layout)
    finally:
        loader.close()
    if views:
        with ClickHouseAnalyzer(source) as analyzer:
            analyzer.create_views(views)
    opened = ClickHouseDatabase(SourceSpec(source, write_tools=WRITE_TOOLS))
    assert opened.session.copies == views
    try:
        yield Engines(duck, opened)
    finally:
        opened.close()
        duck.close()
        drop(clickhouse, database, views)


def _value(value: Any) -> Any:
    """One cell as both engines should agree on it."""
    if isinstance(value, dict):
        if set(value) == {"key", "value"}:  # a DuckDB MAP
            value = dict(zip(value["key"], value["value"], strict=True))
        return {str(k): _value(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple, np.ndarray)):
        # ClickHouse has no NULL array: the empty page's row reads [] there.
        return [_value(v) for v in value] or None
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (pd.Timestamp, datetime)):
        return pd.Timestamp(value).tz_localize(None).isoformat()
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return round(float(value), 6)
    return value


def _detail(text: Any) -> Any:
    """A finding's detail, its recorded arguments in canonical form (the two
    engines keep any one of a group's equal arguments)."""
    if not isinstance(text, str):
        return text
    detail = json.loads(text)
    arguments = detail.get("arguments")
    if isinstance(arguments, str):
        try:
            detail["arguments"] = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            pass
    return detail


def _flat(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            out.update(_flat(item, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = item
    return out


def _attributes(value: Any) -> Any:
    """Span attributes: the Map layout holds every value as the exporter's text
    of it (a double 0.0 as "0"), the JSON layout as JSON (dotted keys nested,
    values typed), the analyzer as toolspan's text (a double as "0.0")."""
    if isinstance(value, str):
        value = _flat(json.loads(value))
    out = {}
    for key, item in _value(value).items():
        text = str(item).lower() if isinstance(item, bool) else item
        try:
            out[key] = float(text)
        except (TypeError, ValueError):
            out[key] = text
    return out


_CELLS = {"detail": _detail, "attributes": _attributes}


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {k: _CELLS.get(k, _value)(v) for k, v in record.items()}
        for record in frame.to_dict("records")
    ]


def _filter_sets(engines: Engines) -> list[Filters]:
    """No filter; a tool and a status; a conversation; the middle third of the time range."""
    bounds = run_query(engines.duck, "filter_bounds", {}).iloc[0]
    first, last = pd.Timestamp(bounds["first_call"]), pd.Timestamp(bounds["last_call"])
    third = (last - first) / 3
    return [
        Filters(),
        Filters(tools=(str(bounds["tools"][0]),), statuses=("succeeded",)),
        Filters(conversation=str(bounds["conversations"][0])),
        Filters(start=(first + third).to_pydatetime(), end=(last - third).to_pydatetime()),
        Filters(statuses=tuple(str(s) for s in bounds["statuses"] if s != "succeeded")),
    ]


def _parameter_sets(engines: Engines, name: str) -> list[dict[str, Any]]:
    """Every parameter set the pages give ``name``, over the data (ids from DuckDB)."""
    filters = [f.params() for f in _filter_sets(engines)]
    everything = {**Filters().params(), "problem_only": False, "limit": 10_000, "offset": 0}
    calls = run_query(engines.duck, "timeline_calls", everything)
    # Six traces spread over the set: the waterfall query is the slow one (0.3 s on chDB).
    every = sorted(set(calls["trace_id"]))
    traces = every[:: max(1, len(every) // 6)][:6]
    first = filters[0]
    buckets = _buckets(engines)
    by_filters: dict[str, list[dict[str, Any]]] = {
        "filter_bounds": [{}],
        "overview_totals": filters,
        "overview_by_tool": filters,
        "trace_count": filters,
        "overview_over_time": [{**f, "bucket": buckets[0]} for f in filters]
        + [{**first, "bucket": buckets[1]}],
        "overview_services": [{**f, "bucket": buckets[0]} for f in filters]
        + [{**first, "bucket": buckets[1]}],
        "timeline_count": [{**f, "problem_only": True} for f in filters]
        + [{**first, "problem_only": False}],
        "timeline_calls": [{**f, "problem_only": True, "limit": 25, "offset": 0} for f in filters]
        + [{**first, "problem_only": False, "limit": 25, "offset": 25}],
        "findings_page": [{**f, "kinds": [], "limit": 50, "offset": 0} for f in filters]
        + [
            {**first, "kinds": k, "limit": 5, "offset": 5}
            for k in (["loop"], ["duplicate_write", "unsafe_retry"])
        ],
        "trace_list": [{**f, "limit": 200, "offset": 0} for f in filters],
    }
    if name in by_filters:
        return by_filters[name]
    if name == "timeline_attempts":
        return [{"span_ids": list(calls["span_id"]), "trace_ids": traces}]
    if name == "finding_calls":
        page = run_query(engines.duck, "findings_page", {**everything, "kinds": []})
        return [
            {"span_ids": list(row.span_ids), "trace_ids": list(row.trace_ids)}
            for row in page.dropna(subset=["kind"]).itertuples()
        ]
    if name == "trace_scopes":
        return [{"trace_id": t} for t in every[:: max(1, len(every) // 12)]]
    if name == "trace_spans":
        return _trace_spans_sets(engines, traces)
    if name == "span_attributes":
        return [
            {"trace_id": row.trace_id, "span_id": row.span_id} for row in calls.head(8).itertuples()
        ]
    raise AssertionError(f"no parameters for the page query {name}: add them here")


def _buckets(engines: Engines) -> list[Any]:
    from toolspan.dashboard._queries import bucket_for

    bounds = run_query(engines.duck, "filter_bounds", {}).iloc[0]
    first, last = pd.Timestamp(bounds["first_call"]), pd.Timestamp(bounds["last_call"])
    return [bucket_for(first, last), pd.Timedelta(days=7).to_pytimedelta()]


def _trace_spans_sets(engines: Engines, traces: list[str]) -> list[dict[str, Any]]:
    sets = []
    for trace_id in traces:
        sets.append({"trace_id": trace_id, "scope": "trace", "scope_id": "", "max_spans": 1000})
        scopes = run_query(engines.duck, "trace_scopes", {"trace_id": trace_id})
        for scope, scope_id in zip(scopes["scope"], scopes["scope_id"], strict=True):
            sets.append(
                {"trace_id": trace_id, "scope": scope, "scope_id": scope_id, "max_spans": 1000}
            )
    return sets


def test_every_page_query_has_a_clickhouse_form() -> None:
    assert len(PAGE_QUERIES) == 15
    for name in PAGE_QUERIES:
        assert (SQL / f"clickhouse_{name}.sql").is_file(), name


@pytest.mark.parametrize("name", PAGE_QUERIES)
def test_page_queries_give_the_same_rows_on_duckdb_and_chdb(engines: Engines, name: str) -> None:
    parameter_sets = _parameter_sets(engines, name)
    assert parameter_sets
    non_empty = 0
    for params in parameter_sets:
        duck, clickhouse = engines.both(name, params)
        assert clickhouse == duck, (name, params)
        non_empty += bool(duck)
    # Not vacuous: the data gives every query rows to compare (the services
    # chart only has them where calls carry toolspan.service: the outage sample).
    assert non_empty or name == "overview_services"


def test_the_coverage_is_the_same_on_duckdb_and_chdb(engines: Engines) -> None:
    # The overview's coverage caption, by the analyzer's statements on each
    # engine (`spans`: rows as stored on ClickHouse, here each span once).
    duck, clickhouse = coverage(engines.duck), coverage(engines.clickhouse)
    assert duck["tool_calls"] and duck["genai_spans"]
    assert clickhouse == duck


def test_the_pages_show_findings_of_every_kind(engines: Engines) -> None:
    page = run_query(engines.clickhouse, "findings_page", {**Filters().params(), "kinds": [],
                                                          "limit": 50, "offset": 0})  # fmt: skip
    counts = page["kind_counts"].iloc[0]
    assert sum(counts.values()) > 0
    assert len(page.dropna(subset=["kind"])) == min(50, sum(counts.values()))
