"""serve's ``GET /api/v1/summary`` is ``toolspan analyze --format json``'s
summary, coverage included (issue 39): real LLM spans that hold no tool call in
any form (the openai client + OpenLLMetry, content capture off) arrive over
OTLP/HTTP, and the API says that 17 GenAI spans came and no call was recognised."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from tests.analyzer.instrumentations import fixture_spans
from toolspan.cli import main
from toolspan.serve import Server

from .conftest import http_url, summary, wait_for

FIXTURE = fixture_spans("openai-openllmetry-off")


def test_the_api_summary_carries_the_coverage_analyze_prints(
    serve: Callable[..., Server], capsys: pytest.CaptureFixture[str]
) -> None:
    server = serve()
    for line in FIXTURE.read_text().splitlines():
        response = httpx.post(
            http_url(server), content=line, headers={"content-type": "application/json"}
        )
        assert response.status_code == 200, response.text
    live = wait_for(lambda: (s := summary(server)["summary"])["spans"] == 19 and s, timeout_s=60)
    main(["analyze", str(FIXTURE), "--format", "json"])
    printed = json.loads(capsys.readouterr().out)["summary"]
    assert live["coverage"] == printed["coverage"]
    assert live["coverage"] == {
        "spans": 19,
        "tool_calls": {},
        "genai_spans": 17,
        "genai_spans_without_calls": 17,
        "unverifiable_calls": 0,
    }
