"""The SQL console's sandbox: every way out is refused, runaway queries stop."""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest

from toolspan.dashboard import (
    DashboardError,
    QueryFailed,
    QueryMemoryExceeded,
    QueryRefused,
    QueryTimeout,
    ResultTooLarge,
    SandboxLimits,
    SqlSandbox,
    open_database,
)

LIMITS = SandboxLimits(time_limit_s=0.5, max_rows=5, memory_limit="256MB", threads=1)
RUNAWAY = "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b"


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sandbox") / "t.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS i FROM range(12)")
        con.execute("CREATE VIEW v AS SELECT i, i * i AS sq FROM t")
    return path


@pytest.fixture(scope="module")
def connection(db_path: Path) -> duckdb.DuckDBPyConnection:
    return open_database(db_path, LIMITS)


@pytest.fixture
def sandbox(connection: duckdb.DuckDBPyConnection) -> SqlSandbox:
    return SqlSandbox(connection, LIMITS)


def test_reads_view_and_caps_rows(sandbox: SqlSandbox) -> None:
    result = sandbox.run("SELECT i, sq FROM v ORDER BY i")
    assert result.columns == ["i", "sq"]
    assert result.rows == [(i, i * i) for i in range(5)]
    assert result.truncated


def test_small_result_is_not_truncated(sandbox: SqlSandbox) -> None:
    result = sandbox.run("FROM v WHERE i < 3")
    assert [row[0] for row in result.rows] == [0, 1, 2]
    assert not result.truncated


def test_row_limit_does_not_materialise_huge_results(sandbox: SqlSandbox) -> None:
    # 10^12 rows would never fit in the time or memory limit unless LIMIT is pushed down.
    result = sandbox.run("SELECT a.range FROM range(1000000) a, range(1000000) b")
    assert len(result.rows) == 5
    assert result.truncated


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM read_json_objects('https://example.com/x.json')",
        "SELECT * FROM 'file:///etc/passwd'",
    ],
)
def test_file_and_network_reads_refused(sandbox: SqlSandbox, sql: str) -> None:
    with pytest.raises((QueryRefused, QueryFailed)) as info:
        sandbox.run(sql)
    message = str(info.value)
    assert "Refused" in message or "does not exist" in message


def test_read_csv_names_the_reason(sandbox: SqlSandbox) -> None:
    with pytest.raises(QueryRefused, match="cannot read or write files"):
        sandbox.run("SELECT * FROM read_csv('/etc/passwd')")


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("COPY t TO '/tmp/toolspan-leak.csv'", "COPY"),
        ("COPY (SELECT 1) TO '/tmp/toolspan-leak.parquet' (FORMAT parquet)", "COPY"),
        ("ATTACH '/tmp/toolspan-other.duckdb' AS other", "ATTACH"),
        ("INSTALL httpfs", "LOAD"),
        ("LOAD httpfs", "LOAD"),
        ("SET enable_external_access = true", "SET"),
        ("SET lock_configuration = false", "SET"),
        ("RESET memory_limit", "SET"),
        ("CREATE TABLE x (i INTEGER)", "CREATE"),
        ("CREATE TEMP TABLE x AS SELECT 1", "CREATE"),
        ("INSERT INTO t VALUES (99)", "INSERT"),
        ("UPDATE t SET i = 0", "UPDATE"),
        ("DELETE FROM t", "DELETE"),
        ("DROP VIEW v", "DROP"),
        ("EXPORT DATABASE '/tmp/toolspan-export'", "EXPORT"),
        ("PRAGMA enable_profiling", "PRAGMA"),
    ],
)
def test_non_read_statements_refused(sandbox: SqlSandbox, sql: str, kind: str) -> None:
    with pytest.raises(QueryRefused, match=rf"only reads .* not {kind}"):
        sandbox.run(sql)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration"),
        ("COPY t TO '/tmp/toolspan-leak.csv'", "disabled by configuration"),
        ("ATTACH '/tmp/toolspan-other.duckdb' AS other", "disabled by configuration"),
        ("INSTALL httpfs", "disabled by configuration"),
        ("LOAD httpfs", "disabled"),
        ("SET enable_external_access = true", "configuration has been locked"),
        ("SET memory_limit = '64GB'", "configuration has been locked"),
        ("SET threads = 64", "configuration has been locked"),
        ("SET lock_configuration = false", "configuration has been locked"),
        ("CREATE TABLE x (i INTEGER)", "read-only mode"),
        ("INSERT INTO t VALUES (99)", "read-only mode"),
        ("DELETE FROM t", "read-only mode"),
        ("DROP VIEW v", "read-only mode"),
    ],
)
def test_duckdb_itself_refuses_without_the_allowlist(
    connection: duckdb.DuckDBPyConnection, sql: str, reason: str
) -> None:
    # The statement allowlist is only the first layer: the connection's own
    # configuration must refuse the same statements if the list is bypassed.
    cursor = connection.cursor()
    with pytest.raises(duckdb.Error, match=reason):
        cursor.execute(sql)
    cursor.close()


def test_nothing_was_written(db_path: Path, sandbox: SqlSandbox) -> None:
    assert sandbox.run("SELECT count(*) FROM t").rows == [(12,)]
    assert not Path("/tmp/toolspan-leak.csv").exists()
    assert not Path("/tmp/toolspan-other.duckdb").exists()


def test_runaway_query_interrupted_at_time_limit(sandbox: SqlSandbox) -> None:
    started = time.monotonic()
    with pytest.raises(QueryTimeout, match=r"Stopped after 0\.5 s"):
        sandbox.run(RUNAWAY)
    elapsed = time.monotonic() - started
    assert 0.4 < elapsed < 5.0
    # The connection is still usable afterwards.
    assert sandbox.run("SELECT 1 AS one").rows == [(1,)]


def test_bad_sql_gets_duckdb_message(sandbox: SqlSandbox) -> None:
    with pytest.raises(QueryFailed, match="syntax error"):
        sandbox.run("SELEC 1")
    with pytest.raises(QueryFailed, match="does not exist"):
        sandbox.run("SELECT * FROM no_such_view")


@pytest.mark.parametrize("sql", ["", "   ", "-- only a comment"])
def test_empty_query(sandbox: SqlSandbox, sql: str) -> None:
    with pytest.raises(QueryRefused, match="Enter a query"):
        sandbox.run(sql)


def test_one_statement_at_a_time(sandbox: SqlSandbox) -> None:
    with pytest.raises(QueryRefused, match="One statement at a time"):
        sandbox.run("SELECT 1; DROP VIEW v")


def test_explain_and_describe_allowed(sandbox: SqlSandbox) -> None:
    assert sandbox.run("DESCRIBE v").rows[0][0] == "i"
    assert sandbox.run("EXPLAIN SELECT * FROM v").columns == ["explain_key", "explain_value"]


def test_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DashboardError, match="no database at"):
        open_database(tmp_path / "missing.duckdb")


# -- bounded memory and result size, statement classification (issue 10) ----

BOUNDED = SandboxLimits(
    time_limit_s=20.0,
    max_rows=10_000,
    memory_limit="256MB",
    threads=1,
    max_process_mb=600,
    max_result_bytes=4 * 1024 * 1024,
)


def _resident_mb() -> float:
    import os

    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def test_a_result_too_large_in_bytes_is_refused_and_the_app_holds_little(
    connection: duckdb.DuckDBPyConnection,
) -> None:
    sandbox = SqlSandbox(connection, BOUNDED)
    before = _resident_mb()
    with pytest.raises(ResultTooLarge, match=r"Result too large: more than 4 MiB after"):
        sandbox.run("SELECT repeat('x', 20000) AS s FROM range(100000)")
    # DuckDB's own chunks of the query (2,048 rows of 200 kB) may pass
    # the process limit before the byte cap: stopped either way.
    with pytest.raises((ResultTooLarge, QueryMemoryExceeded)):
        sandbox.run("SELECT repeat('x', 200000) AS s FROM range(100000)")
    assert _resident_mb() - before < 100  # gigabytes of rows never reached the app
    assert sandbox.run("SELECT 2 AS two").rows == [(2,)]


def test_a_runaway_allocation_is_stopped_without_taking_the_app_down(
    connection: duckdb.DuckDBPyConnection,
) -> None:
    sandbox = SqlSandbox(connection, BOUNDED)
    before = _resident_mb()
    started = time.monotonic()
    with pytest.raises(QueryMemoryExceeded, match="used too much memory"):
        sandbox.run("SELECT len(list_sort(range(50000000))) AS n")
    assert time.monotonic() - started < 15
    assert _resident_mb() - before < 100
    assert sandbox.run("SELECT count(*) FROM t").rows == [(12,)]


def test_rows_within_both_limits_come_back_whole(connection: duckdb.DuckDBPyConnection) -> None:
    result = SqlSandbox(connection, BOUNDED).run("SELECT repeat('x', 1000) AS s FROM range(2000)")
    assert len(result.rows) == 2000 and result.rows[0] == ("x" * 1000,)


@pytest.mark.parametrize(
    "inner",
    [
        "CREATE TEMP TABLE x AS SELECT 1",
        "CREATE TEMP VIEW x AS SELECT 1",
        "CREATE TEMP MACRO m(a) AS a + 1",
        "SET search_path = 'main'",
        "CALL pragma_version()",
        "CHECKPOINT",
        "VACUUM",
        "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')",
        "INSERT INTO t VALUES (1)",
    ],
)
@pytest.mark.parametrize(
    "prefix",
    ["EXPLAIN ANALYZE ", "explain analyse ", "EXPLAIN /* c */ ANALYZE\n-- c\n", "EXPLAIN "],
)
def test_explain_of_a_non_read_is_refused(sandbox: SqlSandbox, prefix: str, inner: str) -> None:
    with pytest.raises(QueryRefused, match=r"only reads .* not EXPLAIN"):
        sandbox.run(prefix + inner)


def test_no_secret_survives_an_explain_analyze(sandbox: SqlSandbox) -> None:
    with pytest.raises(QueryRefused):
        sandbox.run("EXPLAIN ANALYZE CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')")
    assert sandbox.run("SELECT count(*) FROM duckdb_secrets()").rows == [(0,)]


def test_explain_analyze_of_a_read_runs(sandbox: SqlSandbox) -> None:
    result = sandbox.run("EXPLAIN ANALYZE SELECT count(*) FROM v")
    assert result.columns == ["explain_key", "explain_value"]
    assert sandbox.run("EXPLAIN (FORMAT json) SELECT 1").rows


def test_update_extensions_is_refused_not_a_stack_trace(sandbox: SqlSandbox) -> None:
    with pytest.raises(QueryRefused, match="not an unknown statement type"):
        sandbox.run("UPDATE EXTENSIONS")


def test_every_statement_type_the_parser_knows_is_classified() -> None:
    from toolspan.dashboard._sandbox import _STATEMENT_KINDS

    assert {kind.name for kind in duckdb.StatementType} <= set(_STATEMENT_KINDS)
    assert {kind for kind, runs in _STATEMENT_KINDS.items() if runs} == {"SELECT"}


def test_pivot_without_an_in_list_is_a_read(sandbox: SqlSandbox) -> None:
    result = sandbox.run("PIVOT (SELECT i % 2 AS odd FROM t) ON odd USING count(*)")
    assert sorted(result.columns) == ["0", "1"]
    assert result.rows == [(6, 6)]
    with pytest.raises(QueryRefused):
        sandbox.run("EXPLAIN ANALYZE PIVOT t ON i USING count(*); SELECT 1")
