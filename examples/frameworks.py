"""What the framework examples share: the script, the declarations, the wiring.

Each framework example (``openai_agents_agent``, ``pydantic_ai_agent``,
``langchain_agent``) runs the same support-desk request on the real
framework's agent loop; only the model is scripted (with the framework's
own test model) and the services are the deterministic fakes of
``support_desk.py``. The script walks through:

1. ``get_order`` answers 503 once: a read, retried (2 attempts);
2. ``refund_order`` commits, then its response is lost: a keyed write,
   retried under its key, which the payments API replays (one refund);
   ``send_email`` in the same step commits and times out: an unkeyed write,
   not repeated (``unsafe_retry``, one e-mail);
3. ``cancel_order`` commits and times out: settled by its read-back;
4. the model re-plans the refund (a new call id): same key, replayed from
   toolspan's store without reaching the service.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolspan.tracer import Safeguards, Telemetry, setup_telemetry
from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.store import SQLiteStore
from toolspan.tracer.testing import FakeClock

from .support_desk import Fault, SupportDesk

__all__ = [
    "ANSWER",
    "FAULTS",
    "STEPS",
    "USER",
    "Example",
    "Step",
    "main",
    "support_declarations",
]

# One tool call the scripted model makes: (tool, arguments).
Step = tuple[str, dict[str, Any]]

FAULTS: dict[tuple[str, int], Fault] = {
    ("get_order", 1): 503,
    ("refund_order", 1): "commit_then_timeout",
    ("send_email", 1): "commit_then_timeout",
    ("cancel_order", 1): "commit_then_timeout",
}

_REFUND = ("refund_order", {"order_id": "A-1001", "amount_cents": 4900, "reason": "arrived broken"})
STEPS: tuple[tuple[Step, ...], ...] = (
    (("get_order", {"order_id": "A-1001"}),),
    (
        _REFUND,
        (
            "send_email",
            {"to": "rider@example.com", "subject": "Refund issued", "body": "49.00 is on its way."},
        ),
    ),
    (("cancel_order", {"order_id": "A-1002"}),),
    (_REFUND,),  # a re-plan of the same refund
)
ANSWER = "Refunded 49.00 for A-1001, cancelled A-1002 and e-mailed you."
USER = "My light from A-1001 arrived broken: refund it, and cancel A-1002."


def support_declarations(desk: SupportDesk) -> Declarations:
    """What only the application knows about the desk's tools, stated once."""

    def by_order(args: Mapping[str, Any]) -> str:
        return str(args["order_id"])

    return Declarations(
        {
            "get_order": Declaration.read(),
            "track_shipment": Declaration.read(),
            "check_inventory": Declaration.read(),
            # The payments API honours Idempotency-Key: safe to retry under a key.
            # refund_order sends the call's key itself (read with current_call()).
            "refund_order": Declaration.write(
                idempotent=True,
                resource_key=by_order,
                key_passed="Idempotency-Key, from current_call()",
                keys_honoured=True,  # checked: tests/tracer/test_keys_honoured.py
            ),
            # The cancel API has a status read-back: a lost response is settled by asking.
            "cancel_order": Declaration.write(
                read_back=desk.get_cancellation, resource_key=by_order
            ),
            # send_email is not declared: an undeclared tool is a write never repeated blind.
        }
    )


@dataclass(frozen=True)
class Example:
    """What one framework example gets to build and run its agent."""

    desk: SupportDesk
    declarations: Declarations
    telemetry: Telemetry
    safeguards: Safeguards
    conversation_id: str
    request_id: str
    clock: FakeClock | None = None

    def executor_options(self, *, asynchronous: bool) -> dict[str, Any]:
        """The executor's options: store, spans, and fake time when a test asks for it."""
        options: dict[str, Any] = {
            "safeguards": self.safeguards,
            "tracer_provider": self.telemetry.tracer_provider,
        }
        if self.clock is not None:
            options["clock"] = self.clock
            options["sleep"] = self.clock.async_sleep if asynchronous else self.clock.sleep
        return options


def main(
    name: str,
    run: Callable[[Example], Sequence[str]],
    argv: Sequence[str],
    *,
    clock: FakeClock | None = None,
) -> int:
    """Run one framework example: telemetry, store, desk, then the framework's loop.

    ``run`` returns the transcript lines to print. ``clock`` (tests) makes
    the retry delays fake time.
    """
    parser = argparse.ArgumentParser(description=f"toolspan example agent on {name}")
    parser.add_argument("--out", default=f"out/{name}_agent.jsonl", help="OTLP/JSON lines file")
    args = parser.parse_args(argv)

    # One run, one file: a rerun must not look like the same conversation twice.
    Path(args.out).unlink(missing_ok=True)
    telemetry = setup_telemetry(f"support-desk-{name}", json_path=args.out)
    with tempfile.TemporaryDirectory() as scratch:
        store = SQLiteStore(Path(scratch) / "idempotency.sqlite")
        desk = SupportDesk(faults=FAULTS)
        example = Example(
            desk,
            support_declarations(desk),
            telemetry,
            Safeguards(store=store),
            conversation_id=f"example-{name}",
            request_id=f"example-{name}-req1",
            clock=clock,
        )
        transcript = run(example)
        store.close()
    telemetry.shutdown()

    for line in transcript:
        print(line[:160])
    print(f"\nside effects: {json.dumps(dict(sorted(desk.side_effects.items())))}")
    print(f"spans written to {args.out} ({', '.join(telemetry.exporters)})")
    return 0
