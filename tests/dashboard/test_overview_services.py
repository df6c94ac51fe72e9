"""Overview per service: retries per minute against the retry budget, and the
circuit breaker's open periods, from traces the real executor wrote."""

from __future__ import annotations

import random
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from toolspan.dashboard import open_database
from toolspan.tracer import (
    CircuitBreaker,
    Executor,
    RetryBudget,
    Tool,
    ToolCall,
    ToolError,
    setup_telemetry,
)
from toolspan.tracer.testing import FakeClock

from .conftest import ingest
from .test_app import charts, start

SERVICE_OF = {"charge": "payments", "refund_status": "payments", "search": "search"}
OUTAGE = (120.0, 300.0)  # payments answers 503 from minute 2 to minute 5


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten minutes of traffic, one call per tool every 2 s, through a payments outage."""
    root = tmp_path_factory.mktemp("dashboard-fleet")
    telemetry = setup_telemetry("fleet", json_path=str(root / "fleet.jsonl"))
    clock = FakeClock()

    def payments(n: int) -> dict[str, int]:
        if OUTAGE[0] <= clock.now < OUTAGE[1]:
            raise ToolError.from_status(503)
        return {"n": n}

    def search(n: int) -> dict[str, int]:
        if n % 5 == 0:  # healthy: now and then one 503, retried
            clock.advance(0.01)
            if clock.now % 1 < 0.5:
                raise ToolError.from_status(503)
        return {"n": n}

    tools = [Tool(name, payments, service=SERVICE_OF[name]) for name in ("charge", "refund_status")]
    executor = Executor(
        [*tools, Tool("search", search)],
        tracer_provider=telemetry.tracer_provider, sleep=clock.sleep, clock=clock,
        span_clock=clock.time_ns, rng=random.Random(3),
        retry_budget=RetryBudget(0.2, 0.05, 10.0, clock=clock),
        circuit_breaker=CircuitBreaker(0.5, 10, 30.0, 20.0, clock=clock, rng=random.Random(4)),
    )  # fmt: skip
    n = 0
    while clock.now < 600.0:
        for tool in SERVICE_OF:
            executor.execute(ToolCall(tool, f"{tool}-{n}", {"n": n}, conversation_id=f"c{n % 7}"))
        clock.advance(2.0)
        n += 1
    telemetry.shutdown()
    return ingest(root / "fleet.duckdb", root / "fleet.jsonl")


def one(connection: duckdb.DuckDBPyConnection, query: str) -> int:
    return int(connection.execute(query).fetchone()[0])  # type: ignore[index]


def test_retries_per_minute_against_the_budget_and_open_periods(
    fleet_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fleet_db, monkeypatch)
    (shown,) = [frame for frame in charts(app) if "retries_per_min" in frame.columns]
    sql = open_database(fleet_db)
    assert sorted(shown["service"].unique()) == ["payments", "search"]
    # Retries per service from the attempt spans (not the call attributes the page reads).
    attempts = sql.execute("SELECT tool, count(*) FROM attempts WHERE attempt > 1 GROUP BY tool")
    by_service: dict[str, int] = {}
    for tool, count in attempts.fetchall():
        by_service[SERVICE_OF[tool]] = by_service.get(SERVICE_OF[tool], 0) + count
    bucket_min = (shown["bucket_end"] - shown["bucket"]).iloc[0] / pd.Timedelta(minutes=1)
    for service, retries in by_service.items():
        rows = shown[shown["service"] == service]
        assert round(rows["retries_per_min"].sum() * bucket_min) == retries > 0
    # The budget at the page's defaults: 0.2 x first attempts + 10/s x 60 s, per minute.
    first = shown["first_attempts"] / bucket_min
    assert (shown["budget_per_min"] - (0.2 * first + 600.0)).abs().max() < 1e-9
    # Open periods: every bucket with a call the breaker failed fast is shaded.
    refused = one(sql, "SELECT count(*) FROM tool_calls WHERE status = 'circuit_open'")
    assert shown["failed_fast"].sum() == refused > 0
    assert (shown.loc[shown["failed_fast"] > 0, "saw_open"] > 0).all()
    opened = shown[(shown["service"] == "payments") & (shown["saw_open"] > 0)]["bucket"]
    outage = [pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=s) for s in OUTAGE]
    # from the outage's start until at most open_s (20 s) past its end
    assert opened.min() >= outage[0] and opened.max() < outage[1] + pd.Timedelta(seconds=20)
    assert shown[shown["service"] == "search"]["saw_open"].sum() == 0
    assert shown["refused"].sum() == one(
        sql, "SELECT count(*) FROM tool_calls WHERE status = 'retry_budget'"
    )
    labels = {t.value for t in app.subheader}
    assert "Retry budget and circuit breaker by service" in labels


def test_the_budget_line_follows_the_settings(
    fleet_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fleet_db, monkeypatch)
    app.number_input(key="budget_ratio").set_value(0.5).run()
    app.number_input(key="budget_floor").set_value(0.0).run()
    (shown,) = [frame for frame in charts(app) if "retries_per_min" in frame.columns]
    bucket_min = (shown["bucket_end"] - shown["bucket"]).iloc[0] / pd.Timedelta(minutes=1)
    assert (shown["budget_per_min"] - 0.5 * shown["first_attempts"] / bucket_min).abs().max() < 1e-9


def test_no_service_section_without_a_budget_or_breaker(
    fixture_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start(fixture_db, monkeypatch)
    assert not [frame for frame in charts(app) if "retries_per_min" in frame.columns]
