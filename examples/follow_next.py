"""A model that follows ``next`` after a lost write: check first, then repeat or not.

An SMS gateway takes an unkeyed ``send_sms`` and times out. toolspan cannot
know whether the message went out, so it answers ``unsafe_retry`` /
``unknown_outcome`` with ``next`` naming ``get_sms_status``. The scripted
model here is the kind of model toolspan is written for: it reads ``next``
instead of guessing. In the first conversation it is impatient and sends
again at once (toolspan refuses: ``read_back_required``), then checks; the
message had gone out, so it stops. In the second, the message had not gone
out, so after the check it sends again, once.

    python -m examples.follow_next           # writes out/follow_next.jsonl
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from toolspan.tracer import Executor, Safeguards, Tool, ToolCall, ToolResult, setup_telemetry
from toolspan.tracer.store import MemoryStore
from toolspan.tracer.testing import FakeClock

__all__ = ["SmsGateway", "run"]

_MESSAGE = {"to": "+4712345678", "text": "Your replacement light ships today."}


@dataclass
class SmsGateway:
    """A deterministic fake remote service: the first send times out.

    ``lose_after_commit`` decides whether that first send went out before the
    timeout (the response was lost) or never left.
    """

    lose_after_commit: bool
    sent: list[dict[str, Any]] = field(default_factory=list)
    sends: int = 0

    def send_sms(self, to: str, text: str) -> dict[str, Any]:
        self.sends += 1
        if self.sends == 1:
            if self.lose_after_commit:
                self.sent.append({"to": to, "text": text})
            raise TimeoutError("gateway did not answer in 10 s")
        self.sent.append({"to": to, "text": text})
        return {"sms_id": f"sms-{len(self.sent)}"}

    def get_sms_status(self, to: str, text: str) -> dict[str, Any]:
        return {"sent": {"to": to, "text": text} in self.sent}


def _tools(gateway: SmsGateway) -> list[Tool]:
    return [
        Tool(
            "send_sms",
            gateway.send_sms,
            side_effect="write",
            check_with="get_sms_status",
            description="Send a text message.",
            # This gateway sends within its own 10 s timeout or never: a status check
            # right after the timeout is final (the default would wait 30 s first).
            commit_window_s=0,
        ),
        Tool("get_sms_status", gateway.get_sms_status, description="Was this SMS sent?"),
    ]


def _model_turn(transcript: list[dict[str, Any]], impatient: bool) -> dict[str, Any] | None:
    """The scripted model: the next tool call, from the last result alone (or None: done)."""
    results = [orjson.loads(m["content"]) for m in transcript if m["role"] == "tool"]
    if not results:
        return {"name": "send_sms", "arguments": _MESSAGE}
    last = results[-1]
    if last.get("status") == "unsafe_retry" and impatient:
        return {"name": "send_sms", "arguments": _MESSAGE}  # ignores next: refused
    follow = last.get("next") or {}
    if follow.get("tools"):
        return {"name": follow["tools"][0], "arguments": _MESSAGE}
    if last.get("ok") and last.get("data", {}).get("sent") is False:
        return {"name": "send_sms", "arguments": _MESSAGE}  # it did not happen: send once more
    return None


def _conversation(executor: Executor, conversation_id: str, impatient: bool) -> list[ToolResult]:
    transcript: list[dict[str, Any]] = [{"role": "user", "content": "Tell me when it ships."}]
    results: list[ToolResult] = []
    for turn in range(6):
        planned = _model_turn(transcript, impatient)
        if planned is None:
            break
        call_id = f"{conversation_id}-call{turn}"
        transcript.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": planned["name"],
                            "arguments": orjson.dumps(planned["arguments"]).decode(),
                        },
                    }
                ],
            }
        )
        call = ToolCall.from_openai(
            transcript[-1]["tool_calls"][0],
            conversation_id=conversation_id,
            request_id=f"{conversation_id}-req1",
        )
        result = executor.execute(call)
        results.append(result)
        transcript.append(result.to_openai_message())
    return results


def run(out_dir: Path) -> dict[str, tuple[list[ToolResult], SmsGateway]]:
    """Both conversations; spans go to ``out_dir/follow_next.jsonl``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "follow_next.jsonl"
    path.unlink(missing_ok=True)
    telemetry = setup_telemetry("follow-next-example", json_path=path, otlp=False, set_global=False)
    clock = FakeClock()
    outcomes = {}
    try:
        for conversation_id, lost, impatient in (
            ("sms-went-out", True, True),
            ("sms-never-left", False, False),
        ):
            gateway = SmsGateway(lose_after_commit=lost)
            executor = Executor(
                _tools(gateway),
                tracer_provider=telemetry.tracer_provider,
                safeguards=Safeguards(store=MemoryStore(clock=clock)),
                sleep=clock.sleep,
                clock=clock,
                rng=random.Random(0),
            )
            outcomes[conversation_id] = (
                _conversation(executor, conversation_id, impatient),
                gateway,
            )
    finally:
        telemetry.shutdown()
    return outcomes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args(argv)
    for conversation_id, (results, gateway) in run(args.out).items():
        print(f"{conversation_id}:")
        for result in results:
            hint = f"  next: {result.next.tools}" if result.next is not None else ""
            print(f"  {result.tool:15} {result.status:20} attempts={result.attempts}{hint}")
        print(f"  messages actually sent: {len(gateway.sent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
