"""``toolspan check`` on an MCP server through ``toolspan mcp proxy``: the kit's faults on
the link between the proxy and the server, the real ``mcp`` client and server on each side."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver import Context, MCPServer

from toolspan.testing import CheckTarget, FaultKit, check, mcp_proxy_target
from toolspan.tracer.integrations.mcp import IDEMPOTENCY_META_KEY

REFUND = {"order_id": "R-441", "amount_cents": 1299}
CONFIG: dict[str, Any] = {
    "error_code_field": "error_code",
    "retry_after_field": "retry_after",
    "tools": {
        "refund_order": {"side_effect": "write", "idempotent": True},
        "get_order": {"side_effect": "read"},
    },
}
# Each answer lost after the server refunded: the proxy timed out and retried under the key.
DOUBLES = {"timeout after commit", "late commit 0.5 s", "timeout after commit, twice,"}


def build(*, honours_keys: bool):
    def build(kit: FaultKit) -> CheckTarget:
        server = MCPServer("payments")

        @server.tool()
        def refund_order(order_id: str, amount_cents: int, ctx: Context) -> dict[str, Any]:
            """Refund an order."""
            meta = ctx.request_context.meta or {}
            key = meta.get(IDEMPOTENCY_META_KEY) if honours_keys else None
            kit.ledger.commit("refund", order_id, key=key)
            return {"order_id": order_id, "refunded_cents": amount_cents}

        @server.tool()
        def get_order(order_id: str) -> dict[str, Any]:
            """Look an order up."""
            return {"order_id": order_id, "status": "shipped"}

        arguments = {"refund_order": REFUND, "get_order": {"order_id": "R-441"}}
        return mcp_proxy_target(kit, server, CONFIG, arguments=arguments)

    return build


def test_a_server_that_ignores_the_key_refunds_twice_through_the_proxy():
    report = check(build(honours_keys=False))
    unsafe = {row.scenario for row in report.unsafe if row.tool == "refund_order"}
    assert unsafe == DOUBLES
    assert {row.effects for row in report.unsafe} >= {2}
    assert not [row for row in report.unsafe if row.tool == "get_order"]


def test_a_server_that_honours_the_key_is_safe_through_the_proxy():
    report = check(build(honours_keys=True))
    assert report.passed, [row for row in report.rows if row.unsafe]
    rows = {(row.tool, row.scenario): row for row in report.rows}
    lost = rows[("refund_order", "timeout after commit")]
    assert (lost.status, lost.attempts, lost.effects) == ("succeeded", 2, 1)
    # The upstream gone after the work: not retried (connection_error is not retryable).
    gone = rows[("refund_order", "response lost")]
    assert (gone.status, gone.attempts, gone.effects) == ("permanent_error", 1, 1)
    # A 429's Retry-After reached the proxy through the config's fields, on the kit's clock.
    limited = rows[("get_order", "429 Retry-After 2 s")]
    assert (limited.status, limited.attempts) == ("succeeded", 2)
    assert limited.wait_s == pytest.approx(2.0)
