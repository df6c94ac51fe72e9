"""SQLiteStore specifics: the file, its schema, its failures."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.store.conftest import FakeClock
from toolspan.tracer import ConfigurationError, ToolspanError
from toolspan.tracer.store import SQLiteStore, StoreError
from toolspan.tracer.store._sqlite import enter_wal_mode


def test_the_file_is_in_wal_mode_with_a_versioned_schema(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 1


class OtherOpener:
    """A second connection that holds the new file's shared lock until told to go."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("CREATE TABLE t (x)")
        self.connection.execute("BEGIN")
        self.connection.execute("SELECT * FROM t").fetchall()
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def test_entering_wal_mode_waits_for_another_opener(tmp_path: Path) -> None:
    other = OtherOpener(tmp_path / "s.db")
    # timeout=0: no busy handler, so each try fails at once, as when openers race
    ours = sqlite3.connect(tmp_path / "s.db", timeout=0, isolation_level=None)

    def sleep(seconds: float) -> None:
        other.sleep(seconds)
        if len(other.sleeps) == 3:
            other.connection.execute("COMMIT")

    enter_wal_mode(ours, 5.0, sleep=sleep, monotonic=other.monotonic)
    assert ours.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert other.sleeps == [0.001, 0.002, 0.004]
    ours.close()
    other.connection.close()


def test_entering_wal_mode_gives_up_at_its_timeout(tmp_path: Path) -> None:
    other = OtherOpener(tmp_path / "s.db")
    ours = sqlite3.connect(tmp_path / "s.db", timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enter_wal_mode(ours, 1.0, sleep=other.sleep, monotonic=other.monotonic)
    assert 1.0 <= sum(other.sleeps) < 1.05
    assert max(other.sleeps) == 0.05
    ours.close()
    other.connection.close()


def test_records_survive_reopening(tmp_path: Path) -> None:
    clock = FakeClock()
    first = SQLiteStore(tmp_path / "s.db", clock=clock)
    token = first.claim("k", "fp", lease_s=5, ttl_s=60).token
    assert token is not None
    first.complete("k", token, b"done", ttl_s=60)
    first.close()
    reopened = SQLiteStore(tmp_path / "s.db", clock=clock)
    assert reopened.claim("k", "fp", lease_s=5, ttl_s=60).result == b"done"
    reopened.close()


def test_forgotten_rows_are_purged(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SQLiteStore(tmp_path / "s.db", clock=clock)
    token = store.claim("old", "fp", lease_s=5, ttl_s=10).token
    assert token is not None
    store.complete("old", token, b"1", ttl_s=10)
    store.incr("counter", ttl_s=10)
    clock.advance(3600)
    store.claim("new", "fp", lease_s=5, ttl_s=10)
    with sqlite3.connect(tmp_path / "s.db") as raw:
        keys = [row[0] for row in raw.execute("SELECT key FROM idempotency_record")]
        # The epoch marker (loss detection) never expires; everything else did.
        sql = "SELECT count(*) FROM guard_state WHERE name != 'toolspan:epoch'"
        guards = raw.execute(sql).fetchone()[0]
    assert (keys, guards) == (["new"], 0)
    store.close()


def test_in_memory_databases_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="MemoryStore"):
        SQLiteStore(":memory:")
    with pytest.raises(ConfigurationError, match="busy_timeout_s"):
        SQLiteStore(tmp_path / "s.db", busy_timeout_s=0)


def test_a_missing_directory_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="cannot open") as caught:
        SQLiteStore(tmp_path / "no" / "such" / "dir" / "s.db")
    assert isinstance(caught.value.__cause__, sqlite3.Error)
    assert isinstance(caught.value, ToolspanError), "one exception tree for toolspan"


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(b"definitely not sqlite " * 100)
    with pytest.raises(StoreError, match="cannot prepare"):
        SQLiteStore(tmp_path / "s.db")


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "s.db") as raw:
        raw.execute("PRAGMA user_version = 7")
    with pytest.raises(StoreError, match="schema version 7"):
        SQLiteStore(tmp_path / "s.db")


def test_a_locked_database_is_a_store_error_without_the_payload(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", busy_timeout_s=0.001)
    token = store.claim("k", "fp", lease_s=5, ttl_s=60).token
    assert token is not None
    blocker = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="locked") as caught:
            store.complete("k", token, b'{"card": "4111 1111 1111 1111"}', ttl_s=60)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert "4111" not in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    assert store.complete("k", token, b"ok", ttl_s=60), "the failed call rolled back cleanly"
    store.close()
