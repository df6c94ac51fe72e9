"""Findings need no recorded arguments: the analyzer compares the hashes, kept at every level."""

from __future__ import annotations

import random

import pytest

from sample_traces._otel import DeterministicTelemetry
from toolspan.analyzer import Analyzer
from toolspan.tracer import Executor, Redactor, Tool, ToolCall
from toolspan.tracer.testing import FakeClock


def _findings(tmp_path, level: str) -> list[tuple[str, str]]:
    telemetry = DeterministicTelemetry()
    clock = FakeClock()
    sent: list[str] = []
    tools = [
        Tool("send_sms", lambda to, body: sent.append(to) or {"sms_id": len(sent)}, "write"),
        Tool("track_shipment", lambda order_id: {"status": "in_transit"}),
    ]
    executor = Executor(
        tools,
        tracer_provider=telemetry.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
        redactor=Redactor(pii=True),
        capture_arguments=level,  # type: ignore[arg-type]
        capture_results=level,  # type: ignore[arg-type]
        safeguards=None,  # the model's repeats run, so the trace holds what findings look for
    )
    sms = {"to": "+1 415 555 2671", "body": "Your order shipped"}
    other = {"to": "+1 415 555 9999", "body": "Your order shipped"}
    for n, arguments in enumerate([sms, sms, other]):
        executor.execute(ToolCall("send_sms", f"s{n}", arguments, conversation_id="conv"))
    for n in range(3):
        track = ToolCall("track_shipment", f"t{n}", {"order_id": "A-1"}, conversation_id="conv")
        executor.execute(track)
    telemetry.write_jsonl(tmp_path / f"{level}.jsonl")
    with Analyzer() as analyzer:
        analyzer.ingest([tmp_path / f"{level}.jsonl"])
        return sorted((f.kind, f.tool) for f in analyzer.findings())


@pytest.mark.parametrize("level", ["off", "keys", "full"])
def test_findings_are_the_same_at_every_capture_level(tmp_path, level):
    expected = _findings(tmp_path, "redacted")
    # The two messages to different numbers are not one duplicate (the masked
    # numbers look alike; their hashes do not).
    assert expected.count(("duplicate_write", "send_sms")) == 1
    assert ("loop", "track_shipment") in expected
    assert _findings(tmp_path, level) == expected
