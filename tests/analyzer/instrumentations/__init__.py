"""Spans recorded from real instrumentation libraries (README.md): a folder per
stack and capture, with its ``labels.json``; the tests read them from here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent
FOLDERS = sorted(p.name for p in FIXTURES.iterdir() if (p / "labels.json").is_file())


def fixture_spans(folder: str) -> Path:
    """The recorded spans: ``spans.jsonl``, or gzipped when it was over 200 KB."""
    plain = FIXTURES / folder / "spans.jsonl"
    return plain if plain.exists() else plain.with_name("spans.jsonl.gz")


def fixture_labels(folder: str) -> dict[str, Any]:
    labels: dict[str, Any] = json.loads((FIXTURES / folder / "labels.json").read_text())
    return labels
