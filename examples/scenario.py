"""The example conversation: what the scripted model asks for, and what fails.

It exercises every path worth seeing: reads, a read retried after a 503, a
parallel batch, a keyed refund whose first response is lost (the retry is
safe: the key protects it), an unkeyed e-mail that times out and is not
sent again (``unsafe_retry``: the model is told the outcome is unknown), a
cancel whose response is lost and is settled by a read-back, and a status
check the model keeps repeating until toolspan's loop guard stops it.
"""

from __future__ import annotations

from .agent import Planned, Request
from .support_desk import Fault

__all__ = ["EXAMPLE_FAULTS", "EXAMPLE_REQUESTS"]

EXAMPLE_FAULTS: dict[tuple[str, int], Fault] = {
    ("get_order", 1): 503,  # retried automatically
    ("refund_order", 1): "commit_then_timeout",  # keyed: safe to retry
    ("send_email", 1): "commit_then_timeout",  # unkeyed, no read-back: never repeated
    ("cancel_order", 1): "commit_then_timeout",  # unkeyed: read back instead
}

_TRACK = Planned("track_shipment", {"order_id": "A-1001"})

EXAMPLE_REQUESTS: tuple[Request, ...] = (
    Request(
        "My light from order A-1001 arrived broken, please refund it.",
        turns=[
            [Planned("get_order", {"order_id": "A-1001"})],
            [  # one step, three calls: run in parallel where safe
                Planned("check_inventory", {"sku": "BIKE-LIGHT"}),
                Planned(
                    "refund_order",
                    {"order_id": "A-1001", "amount_cents": 4900, "reason": "arrived broken"},
                    step="refund-light",
                ),
                Planned(
                    "send_email",
                    {
                        "to": "rider@example.com",
                        "subject": "Refund issued",
                        "body": "Your refund of 49.00 is on its way.",
                    },
                ),
            ],
        ],
        answer="Refunded 49.00 and e-mailed you a confirmation.",
    ),
    Request(
        "Cancel A-1002 and tell me where A-1001's replacement is.",
        turns=[
            [Planned("cancel_order", {"order_id": "A-1002"})],
            [_TRACK],
            [_TRACK],
            [_TRACK],
            [_TRACK],  # the model keeps asking
        ],
        answer="A-1002 is cancelled; A-1001's replacement is in transit.",
    ),
)
