"""``toolspan.resource.key``: the resource a write touches, on call and attempt
spans, and the same resource in the batch plan."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from toolspan.tracer import Executor, Tool, ToolCall
from toolspan.tracer._batch import plan_lanes

from .conftest import Spans

RESOURCE_KEY = "toolspan.resource.key"


def _by_order(arguments: Mapping[str, Any]) -> str:
    return f"order-{arguments['order_id']}"


def _refund(**_: Any) -> dict[str, bool]:
    return {"refunded": True}


def test_call_and_attempt_spans_carry_the_resource(
    spans: Spans, make_executor: Callable[..., Executor]
) -> None:
    executor = make_executor([Tool("refund", _refund, side_effect="write", resource_key=_by_order)])
    assert executor.execute(ToolCall("refund", "c1", {"order_id": 7}, conversation_id="conv")).ok
    (attempt,) = spans.attempts()
    assert spans.attrs(spans.call())[RESOURCE_KEY] == "order-7"
    assert spans.attrs(attempt)[RESOURCE_KEY] == "order-7"


def test_no_resource_without_a_declaration(
    spans: Spans, make_executor: Callable[..., Executor]
) -> None:
    executor = make_executor([Tool("refund", _refund, side_effect="write")])
    executor.execute(ToolCall("refund", "c1", {"order_id": 7}, conversation_id="conv"))
    assert all(RESOURCE_KEY not in spans.attrs(span) for span in spans.all())


def test_a_failing_resource_function_never_breaks_the_call(
    spans: Spans, make_executor: Callable[..., Executor]
) -> None:
    tool = Tool("refund", _refund, side_effect="write", resource_key=_by_order)
    result = make_executor([tool]).execute(
        ToolCall("refund", "c1", {"amount": 5}, conversation_id="conv")  # no order_id
    )
    assert result.ok
    assert all(RESOURCE_KEY not in spans.attrs(span) for span in spans.all())


def test_a_resource_that_holds_a_secret_is_redacted(
    spans: Spans, make_executor: Callable[..., Executor]
) -> None:
    token = "Bearer abcdefghijklmnopqrstuvwxyz0123456789"
    tool = Tool("refund", _refund, side_effect="write", resource_key=lambda a: a["auth"])
    make_executor([tool]).execute(ToolCall("refund", "c1", {"auth": token}, conversation_id="c"))
    recorded = spans.attrs(spans.call())[RESOURCE_KEY]
    assert "abcdefghijklmnopqrstuvwxyz" not in recorded and "[REDACTED]" in recorded


def test_writes_on_one_resource_share_a_lane_whatever_their_tools() -> None:
    tools = {
        name: Tool(
            name,
            _refund,
            side_effect="write",
            idempotent=True,
            key_passed="scripted",
            resource_key=_by_order,
        )
        for name in ("refund", "cancel")
    }
    calls = [
        ToolCall("refund", "r1", {"order_id": 1}, conversation_id="c", idempotency_key="k1"),
        ToolCall("cancel", "x1", {"order_id": 1}, conversation_id="c", idempotency_key="k2"),
        ToolCall("refund", "r2", {"order_id": 2}, conversation_id="c", idempotency_key="k3"),
    ]
    assert sorted(plan_lanes(calls, tools)) == [[0, 1], [2]]
