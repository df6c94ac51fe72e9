"""The ClickHouse engines the ClickHouse tests run on: embedded chDB always,
and a real server when ``CLICKHOUSE_URL`` is set
(``clickhouse://user:password@host:8123``)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from toolspan.analyzer._clickhouse import _connect, parse_source

# The engines, as fixture params: a server only with CLICKHOUSE_URL.
PARAMS = [
    "chdb",
    pytest.param(
        "server",
        marks=pytest.mark.skipif(
            not os.environ.get("CLICKHOUSE_URL"), reason="CLICKHOUSE_URL is not set"
        ),
    ),
]


class Backend:
    """One ClickHouse engine: a database per test, holding the exporter's otel_traces."""

    def __init__(self, base: str) -> None:
        self.base = base  # a source URL without a database

    @classmethod
    def of(cls, param: str, chdb_dir: Path) -> Backend:
        """The engine a fixture param names, chDB in ``chdb_dir``."""
        if param == "chdb":
            return cls(f"chdb:{chdb_dir}")
        return cls(os.environ["CLICKHOUSE_URL"])

    def source(self, database: str) -> str:
        if self.base.startswith("chdb:"):
            return f"{self.base}?database={database}"
        return f"{self.base.rstrip('/')}/{database}"

    def client(self, database: str = "default") -> Any:
        """A client of this engine, through the analyzer's own connect."""
        return _connect(parse_source(self.source(database)), database=database)


def unique(prefix: str) -> str:
    """A database name of its own: a server is shared by parallel workers and runs."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"
