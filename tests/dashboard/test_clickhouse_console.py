"""The SQL console on a ClickHouse source (embedded chDB), attacked: every
write, DDL, settings change and table function reaching files, URLs or other
servers is refused by the console's check, and the session's own guards
(readonly = 1, set last) refuse the settings changes and table functions again
when the check is bypassed. The analysis' tables are the same afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clickhouse_backend import Backend, unique
from toolspan.analyzer import QueryError
from toolspan.dashboard import QueryMemoryExceeded, QueryRefused, QueryTimeout, SandboxLimits
from toolspan.dashboard._clickhouse import (
    ClickHouseDatabase,
    ClickHouseSandbox,
    SourceSpec,
    check_statement,
)

from .clickhouse_sources import SAMPLES, drop, load_chdb

clickhouse_connect = pytest.importorskip("clickhouse_connect")
pytest.importorskip("chdb")

DATABASE = "d_console"
# Table functions that reach files, URLs, other servers or programs.
_EXTERNAL = {
    "file": "SELECT * FROM file('{secret}', 'LineAsString')",
    "file_quoted": "SELECT * FROM `file`('{secret}', 'LineAsString')",
    "file_commented": "SELECT * FROM file/* a comment */('{secret}', 'LineAsString')",
    "fileCluster": "SELECT * FROM fileCluster('default', '{secret}', 'LineAsString')",
    "url": "SELECT * FROM url('http://127.0.0.1:9/x', 'LineAsString')",
    "urlCluster": "SELECT * FROM urlCluster('default', 'http://127.0.0.1:9/x', 'LineAsString')",
    "s3": "SELECT * FROM s3('http://127.0.0.1:9/bucket/x.csv', 'CSV')",
    "s3Cluster": "SELECT * FROM s3Cluster('default', 'http://127.0.0.1:9/b/x.csv', 'CSV')",
    "gcs": "SELECT * FROM gcs('http://127.0.0.1:9/bucket/x.csv', 'CSV')",
    "remote": "SELECT * FROM remote('127.0.0.1:9', system.one)",
    "remoteSecure": "SELECT * FROM remoteSecure('127.0.0.1:9', system.one)",
    "cluster": "SELECT * FROM cluster('default', system.one)",
    "clusterAllReplicas": "SELECT * FROM clusterAllReplicas('default', system.one)",
    "mysql": "SELECT * FROM mysql('127.0.0.1:9', 'db', 't', 'u', 'p')",
    "postgresql": "SELECT * FROM postgresql('127.0.0.1:9', 'db', 't', 'u', 'p')",
    "mongodb": "SELECT * FROM mongodb('127.0.0.1:9', 'db', 't', 'u', 'p', 'x String')",
    "redis": "SELECT * FROM redis('127.0.0.1:9', 'k', 'k String, v String')",
    "sqlite": "SELECT * FROM sqlite('{secret}', 't')",
    "hdfs": "SELECT * FROM hdfs('hdfs://127.0.0.1:9/x', 'CSV', 'x String')",
    "azureBlobStorage": "SELECT * FROM azureBlobStorage('http://127.0.0.1:9', 'c', 'x.csv')",
    "iceberg": "SELECT * FROM iceberg('http://127.0.0.1:9/bucket/table/')",
    "deltaLake": "SELECT * FROM deltaLake('http://127.0.0.1:9/bucket/table/')",
    "hudi": "SELECT * FROM hudi('http://127.0.0.1:9/bucket/table/')",
    "jdbc": "SELECT * FROM jdbc('jdbc:mysql://127.0.0.1:9/db', 't')",
    "odbc": "SELECT * FROM odbc('DSN=x', 't')",
    "executable": "SELECT * FROM executable('cat {secret}', 'LineAsString', 'x String')",
    "input": "SELECT * FROM input('x String')",
    "dictionary": "SELECT * FROM dictionary('d')",
    "insert_into_function": "INSERT INTO FUNCTION file('{out}', 'CSV') SELECT 1",
}
# Where chDB fails for another reason before its read-only check (no cluster
# is configured; input() is for INSERT only): the console's check is the layer.
_ENGINE_FAILS_FIRST = {
    "cluster",
    "clusterAllReplicas",
    "fileCluster",
    "s3Cluster",
    "urlCluster",
    "input",
}
# Settings changes, refused by the check and by readonly = 1.
_SETTINGS = {
    "set_readonly": "SET readonly = 0",
    "set_time": "SET max_execution_time = 0",
    "settings_clause": "SELECT count() FROM numbers(10) SETTINGS max_execution_time = 0",
    "settings_readonly": "SELECT 1 SETTINGS readonly = 0",
}
# Writes and DDL: refused by the check (readonly = 1 refuses them on the
# collector's table; ClickHouse lets a session write its own temporary tables,
# which is why the check comes first).
_WRITES = {
    "insert": "INSERT INTO tool_calls SELECT * FROM tool_calls",
    "insert_collector": "INSERT INTO {db}.otel_traces SELECT * FROM {db}.otel_traces",
    "delete": "DELETE FROM tool_calls WHERE 1",
    "alter_delete": "ALTER TABLE tool_calls DELETE WHERE 1",
    "update": "ALTER TABLE tool_calls UPDATE tool = 'x' WHERE 1",
    "truncate": "TRUNCATE TABLE tool_calls",
    "drop_temporary": "DROP TEMPORARY TABLE tool_calls",
    "drop_collector": "DROP TABLE {db}.otel_traces",
    "create": "CREATE TABLE x (a Int8) ENGINE = Memory",
    "create_temporary": "CREATE TEMPORARY TABLE x (a Int8)",
    "create_view": "CREATE VIEW x AS SELECT 1",
    "rename": "RENAME TABLE tool_calls TO x",
    "optimize": "OPTIMIZE TABLE {db}.otel_traces FINAL",
    "system": "SYSTEM DROP DNS CACHE",
    "kill": "KILL QUERY WHERE 1",
    "grant": "GRANT ALL ON *.* TO default",
    "attach": "ATTACH TABLE x",
    "detach": "DETACH TABLE tool_calls",
    "outfile": "SELECT * FROM tool_calls INTO OUTFILE '{out}'",
    "backup": "BACKUP TABLE tool_calls TO File('{out}')",
    "two_statements": "SELECT 1; DROP TEMPORARY TABLE tool_calls",
    "use": "USE system",
}


@pytest.fixture(scope="module")
def database(clickhouse: Backend) -> Iterator[ClickHouseDatabase]:
    name = unique(DATABASE)
    loader = clickhouse.client()
    try:
        load_chdb(loader, name, [SAMPLES / "agent_run"])
    finally:
        loader.close()
    spec = SourceSpec(clickhouse.source(name))
    opened = ClickHouseDatabase(spec, SandboxLimits(time_limit_s=1, max_process_mb=64))
    try:
        yield opened
    finally:
        opened.close()
        drop(clickhouse, name)


def _counts(database: ClickHouseDatabase) -> list[int]:
    names = ("tool_calls", "attempts", "findings", database.session.table)
    return [int(database.session.read(f"SELECT count() FROM {n}").rows[0][0]) for n in names]


@pytest.mark.parametrize("attack", sorted({**_EXTERNAL, **_SETTINGS, **_WRITES}))
def test_the_console_refuses_each_attack(
    database: ClickHouseDatabase, tmp_path: Path, attack: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-secret-line\n")
    out = tmp_path / "out.csv"
    db = database.session.table.partition(".")[0]
    sql = {**_EXTERNAL, **_SETTINGS, **_WRITES}[attack].format(secret=secret, out=out, db=db)
    before = _counts(database)
    with pytest.raises(QueryRefused) as refused:
        ClickHouseSandbox(database, database.limits).run(sql)
    assert "the-secret-line" not in str(refused.value)
    if attack in _EXTERNAL or attack in _SETTINGS:
        # The second layer: the engine refuses it by itself.
        with pytest.raises(QueryError) as engine:
            database.session.read(sql)
        assert attack in _ENGINE_FAILS_FIRST or "READONLY" in str(engine.value)
        assert "the-secret-line" not in str(engine.value)
    assert _counts(database) == before
    assert not out.exists()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT tool, count() AS calls FROM tool_calls GROUP BY tool ORDER BY tool",
        "WITH c AS (SELECT * FROM tool_calls) SELECT count() FROM c",
        "SELECT count() FROM tool_calls WHERE tool LIKE '%order%' -- file('x')",
        "SELECT 'SET readonly = 0; file(x)' AS text",
        "SELECT count() FROM {db}.otel_traces",
        "DESCRIBE TABLE findings",
        "SHOW TABLES",
        "EXPLAIN PLAN SELECT count() FROM attempts",
        "EXISTS TABLE tool_calls",
    ],
)
def test_the_console_still_reads(database: ClickHouseDatabase, sql: str) -> None:
    sql = sql.replace("{db}", database.session.table.partition(".")[0])
    result = ClickHouseSandbox(database, database.limits).run(sql)
    assert result.columns and result.rows and not result.truncated


def test_the_session_guards_hold(database: ClickHouseDatabase) -> None:
    sandbox = ClickHouseSandbox(database, database.limits)
    many = sandbox.run("SELECT number FROM numbers(100000)")
    assert len(many.rows) == database.limits.max_rows and many.truncated
    with pytest.raises(QueryTimeout, match="Stopped after 1 s"):
        sandbox.run("SELECT count() FROM numbers(100000000000)")
    with pytest.raises(QueryMemoryExceeded, match="more than 64 MB"):
        sandbox.run("SELECT groupArray(number) FROM numbers(100000000)")
    # The pages keep working after each.
    assert sandbox.run("SELECT count() FROM tool_calls").rows[0][0] > 0


def test_statement_check_reads_past_comments_quotes_and_strings() -> None:
    for sql in ("SELECT $$ -- $$, * FROM file('x')", "SELECT 1 FROM `url`('x')", "  ;  "):
        with pytest.raises(QueryRefused):
            check_statement(sql)
    check_statement("SELECT 'file(x)', \"s3\" FROM tool_calls -- SET x = 1")


def test_the_session_keeps_only_the_tables_its_pages_read(database: ClickHouseDatabase) -> None:
    # The tool spans are read to build tool_calls, then dropped: on 10M spans
    # they were 2.4 of 5.9 GB, held twice while a following dashboard rebuilds.
    query = "SELECT name FROM system.tables WHERE is_temporary ORDER BY name"
    names = {row[0] for row in database.session.read(query).rows}
    assert {"tool_calls", "attempts", "conversations", "findings"} <= names
    assert not names & {"_toolspan_tool_spans", "_toolspan_trace_conversations"}
