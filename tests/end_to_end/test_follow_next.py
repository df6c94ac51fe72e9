"""The example model that follows ``next``: a lost SMS is never sent twice, and the
analyzer sees every repeat as checked (no duplicate write, no write after unknown)."""

from __future__ import annotations

from pathlib import Path

from examples import follow_next
from toolspan.analyzer import Analyzer


def test_a_model_that_follows_next_sends_each_message_once(tmp_path: Path) -> None:
    outcomes = follow_next.run(tmp_path)
    went_out, gateway = outcomes["sms-went-out"]
    assert [(r.tool, r.status) for r in went_out] == [
        ("send_sms", "unsafe_retry"),
        ("send_sms", "read_back_required"),  # the impatient repeat is refused
        ("get_sms_status", "succeeded"),
    ]
    assert len(gateway.sent) == 1 and gateway.sends == 1
    never_left, gateway = outcomes["sms-never-left"]
    assert [(r.tool, r.status) for r in never_left] == [
        ("send_sms", "unsafe_retry"),
        ("get_sms_status", "succeeded"),
        ("send_sms", "succeeded"),  # checked, not sent: sent once more
    ]
    assert len(gateway.sent) == 1 and gateway.sends == 2

    with Analyzer() as analyzer:
        analyzer.ingest([tmp_path / "follow_next.jsonl"])
        analyzer.set_write_tools(["send_sms"])
        kinds = {f.kind for f in analyzer.findings()}
        read_backs = analyzer.query(
            "SELECT read_back FROM tool_calls WHERE tool = 'send_sms' AND status = 'succeeded'"
        )
    assert not kinds & {"duplicate_write", "write_after_unknown", "unsafe_retry"}, kinds
    assert read_backs.rows == [("checked",)]
