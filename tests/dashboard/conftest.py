"""Fixture databases: real OTel SDK traces ingested by the real analyzer."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolspan.analyzer import Analyzer

from .traces import write_chat_only, write_traces


@pytest.fixture(autouse=True)
def restore_main_module() -> Iterator[None]:
    """AppTest installs the app script as ``__main__``; put the real one back.

    Otherwise every later ``multiprocessing`` spawn in the same pytest run
    re-executes the dashboard app in its children.
    """
    main_module = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main_module


def ingest(db_path: Path, *trace_files: Path) -> Path:
    with Analyzer(db_path) as analyzer:
        analyzer.ingest(list(trace_files))
    return db_path


@pytest.fixture(scope="session")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scenario: retries, an early stop, a loop, a duplicate write."""
    root = tmp_path_factory.mktemp("dashboard-db")
    return ingest(root / "traces.duckdb", write_traces(root / "traces.jsonl"))


@pytest.fixture(scope="session")
def chat_only_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Spans, but not one tool span."""
    root = tmp_path_factory.mktemp("dashboard-chat")
    return ingest(root / "chat.duckdb", write_chat_only(root / "chat.jsonl"))


@pytest.fixture(scope="session")
def empty_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The analyzer's schema and views, no spans."""
    path = tmp_path_factory.mktemp("dashboard-empty") / "empty.duckdb"
    Analyzer(path).close()
    return path
