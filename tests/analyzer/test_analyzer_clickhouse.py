"""The analyzer over ClickHouse's otel_traces: the same findings and summary as
the DuckDB path on the same traces, computed in the real engine (embedded chDB,
through the same clickhouse-connect client that talks to a server). With
CLICKHOUSE_URL set (clickhouse://user:password@host:8123), every test here also
runs against that server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.clickhouse_backend import Backend
from toolspan.analyzer import (
    FINDING_KINDS,
    Analyzer,
    AnalyzerError,
    DatabaseError,
    Finding,
    QueryError,
)
from toolspan.analyzer import _exporter_table as clickhouse_otel
from toolspan.analyzer._clickhouse import (
    _SETTINGS,
    ClickHouseAnalyzer,
    attribute_sql,
    canonical_json_sql,
    glob_regex,
    parse_source,
    parse_time,
    run_sql,
    statement,
    table_layout,
)
from toolspan.analyzer._inputs import resolve
from toolspan.cli import main

from .conftest import Recorder
from .retry_traces import write_retry_traces
from .test_analyzer_frameworks import _scripted_agent

clickhouse_connect = pytest.importorskip("clickhouse_connect")
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
# Summary figures that describe trace files, which a ClickHouse table does not have.
FILE_FIGURES = {"files", "lines", "bad_lines", "spans"}


class Table:
    """The collector's otel_traces in a fresh database, in one of the exporter's
    layouts (Map or JSON attributes), and a loader for it."""

    def __init__(self, backend: Backend, layout: str = "map") -> None:
        self.backend = backend
        self.layout = layout
        self.database = f"t_{uuid.uuid4().hex[:12]}"
        self.views: str | None = None  # where init's views and copies are, once made
        self.client = backend.client()
        self.client.command(f"CREATE DATABASE {self.database}")
        clickhouse_otel.create_table(self.client, f"{self.database}.otel_traces", layout)

    @property
    def source(self) -> str:
        return self.backend.source(self.database)

    def load(self, *paths: Path) -> int:
        rows = clickhouse_otel.rows_from_files(resolve(list(paths)), self.layout)
        clickhouse_otel.insert_rows(self.client, rows, f"{self.database}.otel_traces", self.layout)
        return len(rows)

    def load_read_by(self, reads: str, *paths: Path) -> None:
        """Load the spans, then, when the analysis is to read init's copies
        (``reads == "copies"``), run init: its copies made from them."""
        self.load(*paths)
        if reads == "copies":
            self.init()

    def init(self) -> str:
        """``toolspan clickhouse init`` on this table: views, copies and their
        materialized views, in a database of their own; its name."""
        self.views = "toolspan_views_" + self.database
        with ClickHouseAnalyzer(self.source) as az:
            az.create_views(self.views)
        return self.views

    def count(self) -> int:
        return int(
            self.client.query(f"SELECT count() FROM {self.database}.otel_traces").result_rows[0][0]
        )

    def drop(self) -> None:
        # The views' database first: its materialized views read the table.
        self.client.command("DROP DATABASE IF EXISTS toolspan_views_" + self.database)
        self.client.command(f"DROP DATABASE IF EXISTS {self.database}")
        self.client.close()


@pytest.fixture
def layout() -> str:
    """The table's layout: the default Map one; the equality tests parametrize
    this over both (``@pytest.mark.parametrize("layout", LAYOUTS)``)."""
    return "map"


# Both exporter layouts, for the tests that compare with the DuckDB path.
LAYOUTS = clickhouse_otel.LAYOUTS
# Where an analysis reads the tool spans: the collector's raw spans, or the
# copies `toolspan clickhouse init` keeps (made from the spans already there).
READS = ("raw", "copies")


@pytest.fixture
def table(clickhouse: Backend, layout: str) -> Iterator[Table]:
    created = Table(clickhouse, layout)
    try:
        yield created
    finally:
        created.drop()


def _comparable(findings: list[Finding]) -> list[dict[str, Any]]:
    """Findings as JSON, in one order. ``arguments`` (the group's first call's)
    is compared in canonical form."""
    out = []
    for finding in findings:
        record = finding.to_json()
        arguments = record["detail"].get("arguments")
        if isinstance(arguments, str):
            try:
                record["detail"]["arguments"] = orjson.dumps(
                    orjson.loads(arguments), option=orjson.OPT_SORT_KEYS
                ).decode()
            except orjson.JSONDecodeError:
                pass
        out.append(record)
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True))


def _duck(
    paths: list[Path], *, write_tools: list[str] | None = None, min_repeats: int = 3
) -> tuple[dict[str, Any], list[Finding]]:
    with Analyzer() as az:
        if write_tools:
            az.set_write_tools(write_tools)
        az.ingest(paths)
        return az.summary(), az.findings(min_repeats=min_repeats)


def _assert_same(
    table: Table, paths: list[Path], *, write_tools: list[str] | None = None, min_repeats: int = 3
) -> list[Finding]:
    duck_summary, duck_findings = _duck(paths, write_tools=write_tools, min_repeats=min_repeats)
    with ClickHouseAnalyzer(table.source, write_tools=write_tools or ()) as az:
        assert az.layout == table.layout
        assert az.copies == table.views  # read from init's copies exactly when there are some
        summary, findings = az.summary(), az.findings(min_repeats=min_repeats)
    assert summary["table"] == f"{table.database}.otel_traces"
    assert summary["spans"] == table.count()
    # The coverage's `spans` is the summary's (rows as stored, on ClickHouse);
    # every other coverage figure counts each span once, as DuckDB does.
    assert summary["coverage"].pop("spans") == table.count()
    assert duck_summary["coverage"].pop("spans") == duck_summary["spans"]
    assert {k: v for k, v in summary.items() if k not in {"table", "spans"}} == {
        k: v for k, v in duck_summary.items() if k not in FILE_FIGURES
    }
    assert _comparable(findings) == _comparable(duck_findings)
    return findings


# -- the same results as the DuckDB path ---------------------------------------------


@pytest.mark.parametrize("reads", READS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_finding_kind_and_the_summary_equal_the_duckdb_path(
    table: Table, scenario: dict[str, object], reads: str
) -> None:
    paths = [scenario["dir"]]  # type: ignore[list-item]
    table.load_read_by(reads, *paths)
    findings = _assert_same(table, paths)
    # Not vacuous: every kind and the look-alikes' absence are in the comparison.
    assert {"loop", "duplicate_write", "idempotency_conflict", "unsafe_retry"} <= {
        f.kind for f in findings
    }
    assert len(findings) == len(_duck(paths)[1])
    loops = {(f.conversation_id, f.tool) for f in findings if f.kind == "loop"}
    assert ("c-genai", "weather") in loops  # three spellings of one JSON argument
    assert not any(c.startswith(("c-across", "c-twice", "c-poll", "c-retry")) for c, _ in loops)
    # Other write tools and another loop threshold change both paths alike.
    findings = _assert_same(table, paths, write_tools=["create_*"], min_repeats=2)
    assert ("c-genai", "create_ticket") in {
        (f.conversation_id, f.tool) for f in findings if f.kind == "duplicate_write"
    }


@pytest.mark.parametrize("reads", READS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_retry_safety_findings_equal_the_duckdb_path(
    table: Table, tmp_path: Path, reads: str
) -> None:
    labels = write_retry_traces(tmp_path)
    table.load_read_by(reads, labels["dir"])
    findings = _assert_same(table, [labels["dir"]])
    # With the first scenario's kinds (test above), every kind of the analyzer.
    assert {
        "key_churn",
        "write_after_unknown",
        "retried_permanent",
        "parallel_write",
        "unverified_keyed_retry",
    } <= {f.kind for f in findings}
    assert all(f.detail["explanation"] for f in findings)
    findings = _assert_same(table, [labels["dir"]], write_tools=["create_*", "charge*"])
    assert {f.kind for f in findings} | {
        "loop",
        "duplicate_write",
        "idempotency_conflict",
        "unsafe_retry",
    } >= set(FINDING_KINDS)


def test_other_write_tools_rebuild_one_sessions_tables(table: Table, tmp_path: Path) -> None:
    # The session's temporary tables are made once, then dropped and made
    # again for each change of the write tools (and each failure keeps track).
    labels = write_retry_traces(tmp_path)
    table.load(labels["dir"])
    with ClickHouseAnalyzer(table.source) as az:
        for write_tools in ([], ["create_*", "charge*"], ["nothing"], []):
            az.set_write_tools(write_tools)
            expected = _duck([labels["dir"]], write_tools=write_tools)[1]
            assert _comparable(az.findings()) == _comparable(expected)
            # The tool spans and trace conversations only serve to build the rest.
            tables = az.query("SELECT name FROM system.tables WHERE is_temporary").rows
            assert sorted(name for (name,) in tables) == ["_toolspan_attempt_rows", "tool_calls"]
        az.set_write_tools(["charge*"])
        az._stage_sql = lambda stem: "SELECT no_such_column"  # type: ignore[method-assign]
        with pytest.raises(DatabaseError):
            az.findings()  # the first table dropped, none made
        del az._stage_sql
        expected = _duck([labels["dir"]], write_tools=["charge*"])[1]
        assert _comparable(az.findings()) == _comparable(expected)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("sample", ["bicycle", "agent_run"])
def test_the_sample_traces_give_the_same_results(table: Table, sample: str) -> None:
    paths = [SAMPLES / sample / "traces.jsonl"]
    table.load(*paths)
    findings = _assert_same(table, paths, write_tools=["send_*", "refund_*"])
    # The bicycle cases are single calls (retries inside them); the support desk has problems.
    assert bool(findings) == (sample == "agent_run")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_framework_spans_and_two_instrumentations_of_one_call(table: Table, tmp_path: Path) -> None:
    # Real Pydantic AI spans (scripted model): a loop from its own execute_tool spans.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(tmp_path / "pai.jsonl"))))
    _scripted_agent([{"sku": "A1"}] * 3, provider).run_sync("stock?", conversation_id="conv-a")
    provider.shutdown()
    rec = Recorder()
    with rec.conversation("c2"):
        for _ in range(3):
            with rec.span(
                "execute_tool search",
                scope="pydantic-ai",
                **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
            ):
                rec.toolspan_call("search", "c2", {"q": "x"}, result=1)
    # Arguments whose canonical form needs every rule: nested keys, unicode,
    # escapes, floats (2.0 and 1e-7), booleans, null, arrays of objects.
    first = '{"b": {"y": [1, 2.0, {"k": null}], "x": "é\\n/"}, "a": true, "c": 1e-7}'
    with rec.conversation("c-json"):
        for text in (
            first,
            '{"a":true,"c":1E-7,"b":{"x":"\\u00e9\\n\\/","y":[1,2.00,{"k":null}]}}',
            # 2 is not 2.0 (as in orjson): another call.
            '{ "c": 0.0000001, "a": true, "b": { "x": "é\\n/", "y": [1, 2, {"k": null}] } }',
            first,
        ):
            rec.genai_tool("geo", text, '{"ok": 1.5}', conversation="c-json")
    Recorder.write(tmp_path / "t.jsonl", rec.take())
    table.load(tmp_path)
    findings = _assert_same(table, [tmp_path])
    assert {(f.kind, f.conversation_id, f.tool, f.count) for f in findings} >= {
        ("loop", "conv-a", "get_stock", 3),
        ("loop", "c2", "search", 3),
    }
    with ClickHouseAnalyzer(table.source) as az:
        sources = dict(az.query("SELECT source, count() FROM tool_calls GROUP BY source").rows)
        calls = az.query("SELECT span_id, args_fingerprint, answer FROM tool_calls ORDER BY 1").rows
        # The views (copied by the materialized views as the spans arrive, and
        # by the backfill) fingerprint as the analysis does.
        az.create_views("toolspan_views_" + table.database)
        table.load(tmp_path)  # the same spans again, through the materialized views
    assert sources["toolspan"] == 3  # the framework span around each call is dominated
    query = "SELECT span_id, args_fingerprint, answer FROM tool_calls ORDER BY 1"
    assert run_sql(table.source, query, database="toolspan_views_" + table.database).rows == calls
    assert [f.count for f in findings if f.conversation_id == "c-json"] == [3]


@pytest.mark.parametrize("reads", READS)
def test_duplicate_deliveries_count_once(
    table: Table, scenario: dict[str, object], reads: str
) -> None:
    if reads == "copies":
        table.init()  # before the spans: the materialized views copy each insert
    paths = [scenario["dir"]]  # type: ignore[list-item]
    first = table.load(*paths)
    table.load(*paths)  # the collector retried the whole export
    assert table.count() == 2 * first
    _assert_same(table, paths)


@pytest.mark.parametrize("reads", READS)
def test_a_call_that_does_not_state_its_attempts_counts_its_attempt_spans(
    table: Table, tmp_path: Path, reads: str
) -> None:
    # Another implementation of the trace contract (or an older toolspan):
    # the call span has no toolspan.attempts, its attempt spans are there.
    # ClickHouse counts attempt spans only for such calls (clickhouse_derive.sql).
    rec = Recorder()
    common = {"gen_ai.tool.name": "refund", "gen_ai.conversation.id": "c-count"}
    with rec.conversation("c-count"):
        rec.toolspan_call("lookup", "c-count", {"id": 1}, outcomes=("timeout", "ok"))
        with rec.span(
            "execute_tool refund",
            scope="toolspan",
            **common,
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.call.arguments": '{"order": 7}',
                "toolspan.status": "succeeded",
                "toolspan.side_effect": "write",
            },
        ):
            for number in (1, 2, 3):
                outcome = "ok" if number == 3 else "timeout"
                with rec.span(
                    f"attempt {number} refund",
                    scope="toolspan",
                    **common,
                    **{"toolspan.attempt": number, "toolspan.attempt.outcome": outcome},
                ):
                    pass
    Recorder.write(tmp_path / "t.jsonl", rec.take())
    table.load_read_by(reads, tmp_path)
    findings = _assert_same(table, [tmp_path])
    with ClickHouseAnalyzer(table.source) as az:
        attempts = dict(az.query("SELECT tool, attempts FROM tool_calls").rows)
    assert attempts == {"lookup": 2, "refund": 3}
    assert [(f.kind, f.tool, f.count) for f in findings] == [("unsafe_retry", "refund", 3)]


def test_copies_made_by_other_statements_are_not_read_and_init_makes_them_again(
    table: Table, scenario: dict[str, object]
) -> None:
    paths = [scenario["dir"]]  # type: ignore[list-item]
    table.load(*paths)
    views = table.init()
    # As an older toolspan (or another layout) would have left them: other statements.
    table.client.command(f"ALTER TABLE {views}._toolspan_tool_span_rows MODIFY COMMENT 'old'")
    table.client.command(f"TRUNCATE TABLE {views}._toolspan_tool_span_rows")
    with ClickHouseAnalyzer(table.source) as az:
        assert az.copies is None  # the raw spans, not the stale (here: emptied) copy
        assert az.summary()["calls"] > 0
    table.views = None
    _assert_same(table, paths)
    table.init()  # dropped and made again from the collector's table
    _assert_same(table, paths)
    with ClickHouseAnalyzer(table.source, read_copies=False) as az:
        assert az.copies is None


@pytest.mark.parametrize("reads", READS)
def test_the_time_range_selects_spans_by_start(
    table: Table, scenario: dict[str, object], reads: str
) -> None:
    paths = [scenario["dir"]]  # type: ignore[list-item]
    table.load_read_by(reads, *paths)
    with ClickHouseAnalyzer(table.source) as az:
        assert az.copies == table.views
        times = az.query(
            "SELECT conversation_id, min(start_time), max(end_time) FROM tool_calls"
            " GROUP BY conversation_id"
        ).rows
    span = {conversation: (first, last) for conversation, first, last in times}
    since = span["c-write"][0]
    until = span["c-unsafe"][0]  # exclusive: c-unsafe is out
    with ClickHouseAnalyzer(
        table.source, since=since.replace(tzinfo=None), until=until.replace(tzinfo=None)
    ) as az:
        conversations = {
            row[0] for row in az.query("SELECT DISTINCT conversation_id FROM tool_calls").rows
        }
        kinds = {f.kind for f in az.findings()}
        summary = az.summary()
    assert conversations == {"c-write", "c-conflict"}
    assert kinds == {"duplicate_write", "idempotency_conflict"}
    assert summary["spans"] < table.count()
    # A range with nothing in it: empty, not an error.
    with ClickHouseAnalyzer(table.source, until=span["c-loop"][0] - timedelta(days=1)) as az:
        assert az.findings() == []
        assert az.summary()["calls"] == 0


def _span(span_id: str, start: datetime, name: str, **attributes: str) -> dict[str, Any]:
    ns = int(start.timestamp() * 1e9)
    return {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "name": name,
        "startTimeUnixNano": str(ns),
        "endTimeUnixNano": str(ns + 1_000_000),
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }


@pytest.mark.parametrize("reads", READS)
def test_a_conversation_id_before_the_range_is_not_read(table: Table, reads: str) -> None:
    # A long agent run crossing --since: its conversation id is only on the
    # root span, which started before; in range, the call's conversation is
    # its trace id (docs/clickhouse.md, Time range), whichever way it is read.
    t0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
    spans = [
        _span("01" * 8, t0, "invoke_agent", **{"gen_ai.conversation.id": "c-long"}),
        _span("02" * 8, t0 + timedelta(hours=1), "execute_tool search"),
    ]
    request = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}]}
    rows = list(clickhouse_otel.rows_from_request(request, table.layout))
    clickhouse_otel.insert_rows(table.client, rows, f"{table.database}.otel_traces")
    if reads == "copies":
        table.init()
    query = "SELECT conversation_id FROM tool_calls"
    for since, expected in ((None, "c-long"), (t0 + timedelta(minutes=30), "ab" * 16)):
        with ClickHouseAnalyzer(table.source, since=since) as az:
            assert az.copies == table.views
            assert az.query(query).rows == [(expected,)]


def test_a_bounded_range_reads_only_its_day_partitions(
    table: Table, scenario: dict[str, object]
) -> None:
    table.load(scenario["dir"])  # type: ignore[arg-type]  # 2026-01-01
    table.load(SAMPLES / "agent_run" / "traces.jsonl")  # 2026-01-05
    since = datetime(2026, 1, 5, tzinfo=UTC)
    estimates = {}
    for bound in (None, since):
        with ClickHouseAnalyzer(table.source, since=bound) as az:
            sql = az._render(statement("clickhouse_derive", "tool_spans"))
            rows = az._rows(f"EXPLAIN ESTIMATE {sql}")
        estimates[bound] = {row[1]: row[2] for row in rows}  # table -> parts to read
    whole, bounded = estimates[None]["otel_traces"], estimates[since]["otel_traces"]
    assert whole >= 2
    assert bounded < whole  # the 2026-01-01 partition is not read


# -- views, SQL and the command line ---------------------------------------------------


def test_views_have_the_duckdb_names_and_columns_and_rows(
    table: Table, scenario: dict[str, object]
) -> None:
    paths = [scenario["dir"]]  # type: ignore[list-item]
    table.load(*paths)
    views_db = "toolspan_views_" + table.database
    before = table.count()
    with ClickHouseAnalyzer(table.source) as az:
        created = az.create_views(views_db)
    assert {"tool_calls", "attempts", "conversations", "findings"} <= set(created)
    assert table.count() == before  # the collector's table is only read
    with Analyzer() as duck:
        duck.ingest(paths)
        for view in ("tool_calls", "attempts", "conversations", "findings"):
            expected = duck.query(f"SELECT * FROM {view} LIMIT 0").columns
            got = run_sql(table.source, f"SELECT * FROM {view} LIMIT 0", database=views_db)
            assert got.columns == expected, view
        duck_counts = duck.query(
            "SELECT kind, conversation_id, tool, count FROM findings ORDER BY ALL"
        ).rows
        duck_conversations = duck.query(
            "SELECT conversation_id, calls, attempts, failed_calls FROM conversations ORDER BY 1"
        ).rows
    got = run_sql(
        table.source,
        "SELECT kind, conversation_id, tool, count FROM findings ORDER BY ALL",
        database=views_db,
    )
    assert got.rows == duck_counts
    got = run_sql(
        table.source,
        "SELECT conversation_id, calls, attempts, failed_calls FROM conversations ORDER BY 1",
        database=views_db,
    )
    assert got.rows == duck_conversations
    # New spans show in the views at once (plain views).
    table.load(SAMPLES / "bicycle" / "traces.jsonl")
    after = run_sql(table.source, "SELECT count() FROM tool_calls", database=views_db).rows
    assert after[0][0] > sum(row[1] for row in duck_conversations)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cli_analyze_sql_and_init(
    table: Table, scenario: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [scenario["dir"]]  # type: ignore[list-item]
    table.load(*paths)
    assert main(["analyze", str(scenario["dir"]), "--format", "json"]) == 0
    duck = json.loads(capsys.readouterr().out)
    code = main(["analyze", table.source, "--format", "json", "--fail-on", "unsafe_retry"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["summary"]["calls"] == duck["summary"]["calls"]
    assert [(f["kind"], f["conversation_id"], f["count"]) for f in out["findings"]] == [
        (f["kind"], f["conversation_id"], f["count"]) for f in duck["findings"]
    ]
    assert main(["analyze", table.source, "--table", "otel_traces", "--format", "markdown"]) == 0
    printed = capsys.readouterr()
    assert "## Findings" in printed.out
    assert f"analyzing {table.database}.otel_traces" in printed.err
    assert printed.err.rstrip().endswith("from the raw spans")
    views_db = "toolspan_views_" + table.database
    assert main(["clickhouse", "init", table.source, "--database", views_db]) == 0
    assert "tool_calls" in capsys.readouterr().out
    assert main(["analyze", table.source, "--format", "json"]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["findings"] == out["findings"]
    assert f"from init's copies in {views_db}" in printed.err
    query = "SELECT tool, count() AS n FROM tool_calls WHERE tool = 'search' GROUP BY tool"
    assert (
        main(["sql", query, "--source", table.source, "--database", views_db, "--format", "json"])
        == 0
    )
    searches = sum(v for s, v in duck["summary"]["statuses_by_tool"]["search"].items())
    assert json.loads(capsys.readouterr().out) == [{"tool": "search", "n": searches}]


# -- clear errors ------------------------------------------------------------------------


def test_missing_table_and_wrong_schema_are_clear(table: Table) -> None:
    with pytest.raises(DatabaseError, match=r"no table .*nope.*--table"):
        ClickHouseAnalyzer(table.source, table="nope")
    table.client.command(
        f"CREATE TABLE {table.database}.logs (Timestamp DateTime64(9), Body String) ENGINE = Memory"
    )
    with pytest.raises(
        DatabaseError,
        match=r"does not have the clickhouseexporter's otel_traces schema: .*TraceId \(missing\)",
    ):
        ClickHouseAnalyzer(table.source, table="logs")
    # Attributes neither a Map nor JSON (an older or hand-made table): refused by name.
    table.client.command(
        f"CREATE TABLE {table.database}.flat AS {table.database}.otel_traces ENGINE = Memory"
    )
    table.client.command(f"ALTER TABLE {table.database}.flat DROP COLUMN SpanAttributes")
    table.client.command(f"ALTER TABLE {table.database}.flat ADD COLUMN SpanAttributes String")
    with pytest.raises(DatabaseError, match=r"SpanAttributes \(String\).*Map or JSON"):
        ClickHouseAnalyzer(table.source, table="flat")
    with pytest.raises(QueryError, match="clickhouse init"):
        run_sql(table.source, "SELECT * FROM findings", database=table.database)


def test_an_unreachable_server_is_an_error_without_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = "clickhouse://alice:s3cr3t-pw@127.0.0.1:9/otel"  # port 9 (discard): nothing listens
    with pytest.raises(AnalyzerError) as caught:
        ClickHouseAnalyzer(source)
    assert "cannot connect to clickhouse://127.0.0.1:9/otel" in str(caught.value)
    assert "s3cr3t-pw" not in str(caught.value)
    assert main(["analyze", source]) == 2
    err = capsys.readouterr().err
    assert "cannot connect" in err
    assert "s3cr3t-pw" not in err


def test_the_layout_is_told_by_the_attribute_column_type() -> None:
    assert table_layout("Map(LowCardinality(String), String)") == "map"
    assert table_layout("JSON") == "json"
    assert table_layout("JSON(max_dynamic_paths = 256)") == "json"
    assert table_layout("String") is None
    # A dotted key is one path of the JSON column, quoted as one name.
    assert attribute_sql("json", "A", "gen_ai.tool.name", presence=True) == (
        "(A.`gen_ai.tool.name` IS NOT NULL)"
    )
    with pytest.raises(ValueError, match="unknown layout"):
        attribute_sql("xml", "A", "k")


def test_sources_and_credentials() -> None:
    env = {"CLICKHOUSE_USER": "bob", "CLICKHOUSE_PASSWORD": "from-env"}
    src = parse_source("clickhouses://ch.internal/otel", env)
    assert (src.kind, src.host, src.port, src.secure, src.database) == (
        "https"[:0] or "http",
        "ch.internal",
        8443,
        True,
        "otel",
    )
    assert (src.username, src.password) == ("bob", "from-env")
    assert "from-env" not in repr(src)
    assert "from-env" not in src.display()
    src = parse_source("clickhouse://u:p%40ss@h:8124", env)
    assert (src.username, src.password, src.port, src.database) == ("u", "p@ss", 8124, "default")
    assert parse_source("chdb:/tmp/x?database=otel", {}).database == "otel"
    with pytest.raises(DatabaseError, match="needs a host"):
        parse_source("clickhouse:///otel", {})
    with pytest.raises(DatabaseError, match="not a time"):
        parse_time("yesterday")
    assert parse_time("2026-01-31").isoformat() == "2026-01-31T00:00:00+00:00"
    now = parse_time("2026-01-31T12:00:00+02:00")
    assert parse_time("2h", now=now) == now - timedelta(hours=2)


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("send_*", ["send_email", "send_"], ["resend_email", "Send_x"]),
        ("refund?", ["refund1"], ["refund", "refund12"]),
        ("[ab]*", ["a1", "b"], ["c", ""]),
        ("[!ab]x", ["cx"], ["ax"]),
        ("a.b+c", ["a.b+c"], ["aXb+c", "a.bbc"]),
    ],
)
def test_write_tool_globs_match_as_duckdb_glob(pattern: str, yes: list[str], no: list[str]) -> None:
    import re

    import duckdb

    con = duckdb.connect()
    for name in yes + no:
        duck = con.execute("SELECT ? GLOB ?", [name, pattern]).fetchone()[0]  # type: ignore[index]
        assert bool(re.search(glob_regex(pattern), name)) == duck == (name in yes), name


# -- the exporter's value mapping and canonical JSON -------------------------------------


def test_the_exporter_value_mapping() -> None:
    assert [clickhouse_otel.go_float(v) for v in (2.0, 0.5, 1e21, 1.5e-7, 1e20, -0.0)] == [
        "2",
        "0.5",
        "1e+21",
        "1.5e-7",
        "100000000000000000000",
        "-0",
    ]
    assert clickhouse_otel.as_string({"boolValue": True}) == "true"
    assert clickhouse_otel.as_string({"intValue": "42"}) == "42"
    assert (
        clickhouse_otel.as_string(
            {
                "kvlistValue": {
                    "values": [
                        {"key": "b", "value": {"doubleValue": 2.0}},
                        {"key": "a", "value": {"stringValue": "<&>"}},
                    ]
                }
            }
        )
        == '{"a":"<&>","b":2}'
    )
    assert (
        clickhouse_otel.as_string(
            {"arrayValue": {"values": [{"intValue": "1"}, {"boolValue": False}]}}
        )
        == "[1,false]"
    )


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=6), children, max_size=4
        )
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def engine(chdb_dir: Path) -> Iterator[Any]:
    client = clickhouse_connect.get_client(dsn=f"chdb://{chdb_dir}")
    yield client
    client.close()


def _canonical_in_clickhouse(engine: Any, texts: list[str]) -> list[str]:
    """ClickHouse's canonical JSON of each text, in order, in one query (a query costs
    far more than a value in it)."""
    sql = (
        f"SELECT {canonical_json_sql('t')} FROM "
        "(SELECT arrayJoin(arrayZip(range(length({ts:Array(String)})), {ts:Array(String)})) AS p, "
        "p.1 AS i, p.2 AS t) ORDER BY i"
    )
    rows = engine.query(sql, parameters={"ts": texts}, settings=_SETTINGS).result_rows
    return [row[0] for row in rows]


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(st.tuples(_json, st.booleans()), min_size=1, max_size=12))
# A backslash before U+2028: replacing "\\u2028" in toJSONString's output took
# the escaped backslash's second half for the escape.
@example(values=[({"\\\u2028": None}, False), (["a\u2028b\u2029\u2028", "\u2029"], True)])
# Text that spells out a backslash and "u001F" (replacing "\u001F" in
# toJSONString's output lowercased it); string values that start with U+0001 and
# "f", as the floats' marks do (they were read as floats); keys that do; strings
# and floats deeper than the levels whose keys are sorted.
@example(
    values=[
        ({"\\u001F": "a\\u001Fb\\\u001f", "\x01f2.5": ["\x01f1.5", "\x01s", "\x01"]}, False),
        ({"\x01f1": "\x01f0.5", "b": "\x01"}, True),
        ([[[[[[[["\u2028\x1f", 1.0, 1e-7, {"\x01f3": 2.0}]]]]]]]], False),
    ]
)
def test_canonical_json_in_clickhouse_is_orjsons(engine: Any, values: list[Any]) -> None:
    """Property: ClickHouse's canonical JSON of any JSON text is the DuckDB
    path's (orjson with sorted keys), whatever the spacing and key order."""
    texts = [
        json.dumps(value, indent=1 if spaced else None, ensure_ascii=spaced)
        for value, spaced in values
    ]
    expected = [
        orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS).decode() for text in texts
    ]
    assert _canonical_in_clickhouse(engine, texts) == expected


def test_canonical_json_is_short_to_plan() -> None:
    """ClickHouse's planning time grows with an expression's length (26.9 KB at
    six levels took 0.3 to 3.9 s to plan, before reading a row): only the key
    sorting repeats per level, strings and floats are written once."""
    six = len(canonical_json_sql("t"))
    assert six < 5_000
    assert six - len(canonical_json_sql("t", 5)) < 500


def test_text_that_is_not_json_stays_as_it_is(engine: Any) -> None:
    sql = f"SELECT {canonical_json_sql('t')} FROM (SELECT {{t:String}} AS t)"
    for text in ("Paris is...", "{broken", ""):
        assert (
            engine.query(sql, parameters={"t": text}, settings=_SETTINGS).result_rows[0][0] == text
        )


# -- hostile input and hostile servers (issue 28) ----------------------------------------


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("toolspan: error:")]
    return line


def test_spans_whose_text_is_not_utf8_are_analysed(
    table: Table, scenario: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    table.load(scenario["dir"])  # type: ignore[arg-type]
    bad = f"{table.database}.bad_utf8"
    clickhouse_otel.create_table(table.client, bad)
    broken = (
        "mapApply((k, v) -> (k, if(k IN ('gen_ai.tool.name', 'gen_ai.tool.call.arguments',"
        " 'gen_ai.conversation.id'), concat(v, unhex('C328FF')), v)), SpanAttributes)"
    )
    table.client.command(
        f"INSERT INTO {bad} SELECT * REPLACE ({broken} AS SpanAttributes)"
        f" FROM {table.database}.otel_traces"
    )
    for output in ("json", "markdown", "table"):
        code = main(["analyze", table.source, "--table", "bad_utf8", "--format", output])
        printed = capsys.readouterr()
        assert code == 0 and "Traceback" not in printed.err, printed.err
        if output == "json":
            findings = json.loads(printed.out)["findings"]
            assert any("\ufffd" in f["tool"] for f in findings)
            assert not any("c328ff" in json.dumps(f) for f in findings)  # no driver hex


def test_a_time_too_far_back_is_a_clear_error(
    table: Table, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(DatabaseError, match="not a time"):
        parse_time("99999999999d")
    assert main(["analyze", table.source, "--since", "99999999999d"]) == 2
    assert "not a time" in _one_line_error(capsys)


@pytest.mark.parametrize("name", ["x$y", "a$source", "p$$q", "x tool_calls", "q`b"])
def test_init_takes_any_database_name_as_a_name(table: Table, scenario: dict[str, Any], name: str):
    table.load(scenario["dir"])
    views_db = f"{table.database}_{name}"
    try:
        assert main(["clickhouse", "init", table.source, "--database", views_db]) == 0
        created = run_sql(
            table.source,
            "SELECT name FROM system.tables WHERE database = currentDatabase()",
            database=views_db,
        )
        assert {"tool_calls", "findings", "attempts"} <= {row[0] for row in created.rows}
        calls = run_sql(table.source, "SELECT count() FROM tool_calls", database=views_db)
        with ClickHouseAnalyzer(table.source) as az:
            assert calls.rows[0][0] == len(az.tool_calls().rows) > 0
    finally:
        quoted = views_db.replace("`", "\\`")
        table.client.command(f"DROP DATABASE IF EXISTS `{quoted}`")


def test_a_source_url_that_does_not_parse_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(DatabaseError, match="not a ClickHouse source URL") as refused:
        parse_source("clickhouse://u:pw-secret@[::1/otel")
    assert "pw-secret" not in str(refused.value)
    assert main(["analyze", "clickhouse://u:pw-secret@[::1/otel"]) == 2
    line = _one_line_error(capsys)
    assert "not a ClickHouse source URL" in line and "pw-secret" not in line


class _EchoingServer:
    """A loopback HTTP server that answers as a ClickHouse server refusing the
    login, echoing the credentials it got (the password header, the
    Authorization header) in its error body, and the password ``repeat`` times."""

    def __init__(self, password: str, repeat: int) -> None:
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self._refuse()

            def do_GET(self) -> None:
                self._refuse()

            def _refuse(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                echoed = " | ".join(f"{k}: {v}" for k, v in self.headers.items())
                # Credentials as this client sends them (Basic auth), echoed; then
                # the password again and again, so that a 600-character cut splits one.
                body = (
                    f"Code: 516. DB::Exception: {echoed}: Authentication failed. "
                    f"{outer.password * outer.repeat} (AUTHENTICATION_FAILED)"
                ).encode()
                self.send_response(500)
                self.send_header("X-ClickHouse-Exception-Code", "516")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.password, self.repeat = password, repeat
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    "password, repeat",
    [
        ("two  spaces-in-it", 1),
        ("a\ttab-in-it-too", 1),
        ("crosses-the-600-character-cut-0123456789", 30),
        ("plain-secret-value", 0),
    ],
)
def test_a_server_echoing_the_credentials_never_gets_them_printed(
    password: str, repeat: int, capsys: pytest.CaptureFixture[str]
) -> None:
    import base64
    from urllib.parse import quote

    server = _EchoingServer(password, repeat)
    try:
        source = f"clickhouse://alice:{quote(password, safe='')}@127.0.0.1:{server.port}/otel"
        basic = base64.b64encode(f"alice:{password}".encode()).decode()
        with pytest.raises(AnalyzerError) as refused:
            ClickHouseAnalyzer(source)
        assert main(["analyze", source]) == 2
        line = _one_line_error(capsys)
    finally:
        server.close()
    for text in (str(refused.value), line):
        assert "***" in text
        for secret in (password, basic, password[:5], " ".join(password.split())[:5], basic[:8]):
            assert secret not in text, (secret, text)


# -- toolspan sql --source: read-only and bounded ----------------------------------------

_ATTACKS = {
    "insert": "INSERT INTO {db}.otel_traces (TraceId) VALUES ('x')",
    "drop": "DROP TABLE {db}.otel_traces",
    "truncate": "TRUNCATE TABLE {db}.otel_traces",
    "alter": "ALTER TABLE {db}.otel_traces DELETE WHERE 1",
    "create": "CREATE TABLE {db}.t (x Int8) ENGINE = Memory",
    "temporary": "CREATE TEMPORARY TABLE t (x Int8)",
    "set": "SET readonly = 0",
    "settings-clause": "SELECT 1 SETTINGS max_execution_time = 0",
    "readonly-clause": "SELECT 1 SETTINGS readonly = 0",
    "file": "SELECT * FROM file('{secret}', 'LineAsString')",
    "url": "SELECT * FROM url('http://127.0.0.1:9/x', 'LineAsString')",
    "s3": "SELECT * FROM s3('http://127.0.0.1:9/bucket/x.csv', 'CSV')",
    "remote": "SELECT * FROM remote('127.0.0.1:9', system.one)",
    "remoteSecure": "SELECT * FROM remoteSecure('127.0.0.1:9', system.one)",
    "mysql": "SELECT * FROM mysql('127.0.0.1:9', 'db', 't', 'u', 'p')",
    "postgresql": "SELECT * FROM postgresql('127.0.0.1:9', 'db', 't', 'u', 'p')",
    "hdfs": "SELECT * FROM hdfs('hdfs://127.0.0.1:9/x', 'CSV', 'x String')",
    "jdbc": "SELECT * FROM jdbc('jdbc:mysql://127.0.0.1:9/db', 't')",
    "odbc": "SELECT * FROM odbc('DSN=x', 't')",
    "executable": "SELECT * FROM executable('cat {secret}', 'LineAsString', 'x String')",
}


@pytest.mark.parametrize("attack", list(_ATTACKS))
def test_sql_on_a_source_refuses_writes_settings_and_table_functions(
    table: Table, tmp_path: Path, attack: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-line\n")
    table.load(SAMPLES / "bicycle")
    before = table.count()
    sql = _ATTACKS[attack].format(db=table.database, secret=secret)
    with pytest.raises(QueryError) as refused:
        run_sql(table.source, sql, database=table.database)
    assert "READONLY" in str(refused.value) and "the-secret-line" not in str(refused.value)
    assert table.count() == before


def test_sql_on_a_source_still_reads_and_its_limits_hold(table: Table) -> None:
    from toolspan.analyzer._clickhouse import SqlLimits

    table.load(SAMPLES / "bicycle")
    db = table.database
    rows = run_sql(table.source, "SELECT count() FROM otel_traces", database=db)
    assert rows.rows == [(table.count(),)]
    with pytest.raises(QueryError, match=r"TOO_MANY_ROWS|Limit for result"):
        run_sql(
            table.source,
            "SELECT number FROM numbers(10)",
            database=db,
            limits=SqlLimits(max_rows=5),
        )
    with pytest.raises(QueryError, match=r"MEMORY_LIMIT|memory limit"):
        run_sql(
            table.source,
            "SELECT groupArray(number) FROM numbers(100000000)",
            database=db,
            limits=SqlLimits(max_memory_bytes=50_000_000),
        )
    with pytest.raises(QueryError, match=r"TIMEOUT|Timeout"):
        run_sql(
            table.source,
            "SELECT count() FROM numbers(100000000000)",
            database=db,
            limits=SqlLimits(timeout_s=1),
        )


def _replayed_refunds(directory: Path) -> Path:
    """The real executor: a keyed refund asked 3 times in one request (it runs once,
    then replays twice) and a read asked 3 times (it runs each time)."""
    from toolspan.tracer import Executor, Tool, ToolCall

    exporter_path = directory / "replays.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(exporter_path))))
    refund = Tool(
        "refund_order",
        lambda order_id: {"refund_id": "rf_1"},
        side_effect="write",
        idempotent=True,
        key_passed="scripted",
        keys_honoured=True,
    )
    lookup = Tool("get_order", lambda order_id: {"status": "delivered"})
    executor = Executor([refund, lookup], tracer_provider=provider)
    with executor.run("refund-agent", request_id="req-1", conversation_id="c-replays"):
        for tool in ("refund_order", "get_order"):
            for i in range(3):
                executor.execute(ToolCall(tool, f"{tool}-{i}", {"order_id": "A1"}, ""))
    provider.shutdown()
    return exporter_path


@pytest.mark.parametrize("reads", READS)
def test_a_loop_of_replays_says_it_ran_once_on_both_paths(
    table: Table, tmp_path: Path, reads: str
) -> None:
    path = _replayed_refunds(tmp_path)
    table.load_read_by(reads, path)
    loops = {f.tool: f for f in _assert_same(table, [path]) if f.kind == "loop"}
    refund, lookup = loops["refund_order"], loops["get_order"]
    assert (refund.count, refund.detail["executions"], refund.detail["replays"]) == (3, 1, 2)
    assert refund.detail["explanation"].startswith(
        "refund_order was asked 3 times (ran 1, replayed 2) with the same arguments"
    )
    assert (lookup.detail["executions"], lookup.detail["replays"]) == (3, 0)
    assert lookup.detail["explanation"].startswith("get_order ran 3 times with the same")
