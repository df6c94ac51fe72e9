"""Invariants, over any fault plan: the fixed refund tools never refund twice."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.testing import refund_checks
from toolspan.testing import Fault, FaultKit
from toolspan.tracer import ToolCall

FAULTS = st.sampled_from(
    [
        Fault.ok(),
        Fault.slow(2),
        Fault.http_status(408),
        Fault.http_status(429, retry_after_s=1),
        Fault.http_status(503),
        Fault.connection_reset(),
        Fault.timeout_after_commit(),
        Fault.response_lost(),
        Fault.late_commit(0.5),
        Fault.late_commit(40),  # after the 30 s commit window
    ]
)
FIXED = ["build_key_passed", "build_read_back", "build_as_in_the_readme"]


@settings(max_examples=150, deadline=None)
@given(plan=st.lists(FAULTS, max_size=8), then=FAULTS, build=st.sampled_from(FIXED))
def test_a_fixed_refund_tool_refunds_at_most_once(plan, then, build):
    kit = FaultKit(plan, then=then)
    executor = getattr(refund_checks, build)(kit)
    call = ToolCall(
        "refund_order",
        "call-1",
        {"order_id": "R-441", "amount_cents": 1299},
        conversation_id="c-1",
        request_id="r-1",
        idempotency_key="refund:R-441",
    )
    result = executor.execute(call)
    kit.settle()
    assert kit.ledger.count("refund", "R-441") <= 1
    if result.status == "succeeded":  # a success is never invented
        assert kit.ledger.count("refund", "R-441") == 1
