"""A multi-conversation support-desk agent run with planted problems.

Every conversation runs the example agent loop (``examples/agent.py``)
through the real tracer, against the deterministic support-desk fakes, on a
fake clock. Each conversation says which findings it plants; the benign
look-alikes plant none. The test suite checks that the analyzer finds
exactly the planted findings in the generated traces, and nothing else.

The mis-declared ``send_sms`` tool is the planted unsafe retry: a legacy
SMS gateway registered as read-only by mistake, so the retry policy treats
it as safe to repeat. Its traces say ``toolspan.side_effect = none``; the
analyzer catches it when told the truth with ``--write-tools send_sms``
(see ``WRITE_TOOLS``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.sdk.trace.export import SpanExporter

from examples.agent import Planned, Request, run_conversation
from examples.support_desk import Fault, SupportDesk, support_tools
from toolspan.tracer import Executor, Safeguards, Tool
from toolspan.tracer.store import MemoryStore
from toolspan.tracer.testing import FakeClock

from ._otel import DeterministicTelemetry

__all__ = ["CONVERSATIONS", "WRITE_TOOLS", "Conversation", "generate"]

# Tools the analyzer must treat as writes whatever their spans say.
WRITE_TOOLS: tuple[str, ...] = ("send_sms",)


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    story: str
    requests: Sequence[Request]
    faults: dict[tuple[str, int], Fault] = field(default_factory=dict)
    shipment_updates: dict[str, list[str]] = field(default_factory=dict)
    planted: tuple[tuple[str, str], ...] = ()  # (finding kind, tool)
    shape: str = "openai"


def _p(tool: str, step: str | None = None, **arguments: object) -> Planned:
    return Planned(tool, dict(arguments), step)


_TRACK_1001 = _p("track_shipment", order_id="A-1001")
_EMAIL = _p(
    "send_email", to="kim@example.com", subject="Your refund", body="Refund of 25.00 issued."
)
_SMS = _p("send_sms", phone="+4790000000", text="Your parcel is at the pickup point.")

CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        "conv-loop-tracking",
        "The model keeps asking where the parcel is; toolspan's loop guard stops the 4th ask.",
        [Request("Where is my parcel?", [[_TRACK_1001]] * 4)],
        planted=(("loop", "track_shipment"),),
    ),
    Conversation(
        "conv-ping-pong",
        "The model ping-pongs between the order and the stock level, three times round.",
        [
            Request(
                "Can I swap my helmet for another size?",
                [[_p("get_order", order_id="A-1002")], [_p("check_inventory", sku="HELMET-M")]] * 3,
            )
        ],
        planted=(("loop", "get_order"), ("loop", "check_inventory")),
        shape="anthropic",
    ),
    Conversation(
        "conv-double-email",
        "The model re-sends the same confirmation e-mail on the next turn (no key: it ran twice).",
        [
            Request("Refund my bell, please.", [[_p("get_order", order_id="A-1003")], [_EMAIL]]),
            Request("Did you send the confirmation?", [[_EMAIL]]),
        ],
        planted=(("duplicate_write", "send_email"),),
    ),
    Conversation(
        "conv-refund-conflict",
        "The model re-plans the refund step with another amount under the same key: refused.",
        [
            Request(
                "Refund my bell.",
                [
                    [
                        _p(
                            "refund_order",
                            "refund",
                            order_id="A-1003",
                            amount_cents=2500,
                            reason="unwanted",
                        )
                    ],
                    [
                        _p(
                            "refund_order",
                            "refund",
                            order_id="A-1003",
                            amount_cents=3000,
                            reason="unwanted, plus shipping",
                        )
                    ],
                ],
            )
        ],
        planted=(("idempotency_conflict", "refund_order"),),
    ),
    Conversation(
        "conv-sms-retry",
        "A legacy SMS gateway declared read-only by mistake times out after sending; "
        "the retry sends the SMS again.",
        [Request("Text me when it arrives.", [[_SMS]])],
        faults={("send_sms", 1): "commit_then_timeout"},
        planted=(("unsafe_retry", "send_sms"),),
    ),
    # -- benign look-alikes: nothing to find --------------------------------------
    Conversation(
        "conv-polling",
        "Polling that makes progress: same call, a different answer each time.",
        [Request("Track A-1003 until it lands.", [[_p("track_shipment", order_id="A-1003")]] * 4)],
        shipment_updates={
            "A-1003": ["label_created", "in_transit", "out_for_delivery", "delivered"]
        },
    ),
    Conversation(
        "conv-replayed-refund",
        "A keyed refund loses its response; the safe retry and a later re-plan replay it.",
        [
            Request(
                "Refund A-1001.",
                [
                    [
                        _p(
                            "refund_order",
                            "refund-a1001",
                            order_id="A-1001",
                            amount_cents=4900,
                            reason="broken",
                        )
                    ]
                ],
            ),
            Request(
                "Please make sure the refund went through.",
                [
                    [
                        _p(
                            "refund_order",
                            "refund-a1001",
                            order_id="A-1001",
                            amount_cents=4900,
                            reason="broken",
                        )
                    ]
                ],
            ),
        ],
        faults={("refund_order", 1): "commit_then_timeout"},
        shape="anthropic",
    ),
    Conversation(
        "conv-retry-succeeded",
        "Transient 503 and 429 (Retry-After 1), then the lookup succeeds.",
        [Request("What did I order?", [[_p("get_order", order_id="A-1002")]])],
        faults={("get_order", 1): 503, ("get_order", 2): (429, 1.0)},
    ),
    Conversation(
        "conv-twice",
        "Two identical lookups: a repeat, not a loop.",
        [Request("Status of A-1003?", [[_p("get_order", order_id="A-1003")]] * 2)],
    ),
    Conversation(
        "conv-across-a",
        "The same call in two conversations, twice each: not a loop in either.",
        [Request("Where is A-1002?", [[_p("track_shipment", order_id="A-1002")]] * 2)],
    ),
    Conversation(
        "conv-across-b",
        "The same call in two conversations, twice each: not a loop in either.",
        [Request("Where is A-1002?", [[_p("track_shipment", order_id="A-1002")]] * 2)],
        shape="anthropic",
    ),
    Conversation(
        "conv-lost-cancel",
        "A cancel loses its response; the read-back finds it done, so nothing is repeated.",
        [
            Request(
                "Cancel A-1002 and check the stock of helmets.",
                [
                    [
                        _p("cancel_order", order_id="A-1002"),
                        _p("check_inventory", sku="HELMET-M"),
                        _p("get_order", order_id="A-1001"),
                    ]
                ],
            )
        ],
        faults={("cancel_order", 1): "commit_then_timeout"},
    ),
)


def _tools(desk: SupportDesk) -> list[Tool]:
    mis_declared_sms = Tool("send_sms", desk.send_sms)  # the planted bug: a write declared a read
    return [*support_tools(desk), mis_declared_sms]


def generate(
    out: Path,
    conversations: Sequence[Conversation] = CONVERSATIONS,
    *,
    also_to: SpanExporter | None = None,
) -> int:
    """Run every conversation and write ``traces.jsonl``; returns the span count.
    ``also_to`` also gets every span as it ends (the live demo's OTLP exporter)."""
    telemetry = DeterministicTelemetry(service_name="support-desk-agent", seed=7, also_to=also_to)
    store_clock = FakeClock(start=DeterministicTelemetry.epoch_for("store"))
    store = MemoryStore(clock=store_clock)
    tracer = telemetry.provider.get_tracer("toolspan.examples")
    for index, conversation in enumerate(conversations):
        clock = FakeClock(epoch_s=telemetry.epoch_for(conversation.conversation_id))
        desk = SupportDesk(
            faults=conversation.faults,
            pause=clock.advance,
            shipment_updates=conversation.shipment_updates,
        )
        executor = Executor(
            _tools(desk),
            tracer_provider=telemetry.provider,
            sleep=clock.sleep,
            clock=clock,
            rng=random.Random(index),
            span_clock=clock.time_ns,
            safeguards=Safeguards(store=store),
        )
        run_conversation(
            conversation.requests,
            executor,
            conversation_id=conversation.conversation_id,
            shape="anthropic" if conversation.shape == "anthropic" else "openai",
            tracer=tracer,
            now_ns=clock.time_ns,
            model_pause=clock.advance,
        )
    return telemetry.write_jsonl(out / "traces.jsonl")
