"""Settings and fixtures shared by the whole suite."""

from pathlib import Path

import pytest
from hypothesis import settings

from tests import clickhouse_backend
from tests.clickhouse_backend import Backend

# tests/testing/test_plugin.py runs pytest inside pytest to show toolspan's plugin loads.
pytest_plugins = ["pytester"]

# Property tests check invariants, not speed: a per-example deadline only turns a
# busy 2-core CI machine into a flaky failure (DuckDB-backed examples can take
# 300 ms when other tests run beside them). Speed is measured in bench/.
settings.register_profile("toolspan", deadline=None)
settings.load_profile("toolspan")


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The suite's embedded ClickHouse directory. chDB runs one engine, on one
    data directory, per process (a second path is refused while a client is
    open), so every chDB test of a worker works in a database of its own here."""
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture(scope="session", params=clickhouse_backend.PARAMS)
def clickhouse(request: pytest.FixtureRequest, chdb_dir: Path) -> Backend:
    """The engine every ClickHouse test runs on: chDB in ``chdb_dir``, and a
    real server too when ``CLICKHOUSE_URL`` is set."""
    return Backend.of(request.param, chdb_dir)
