"""``toolspan check`` on tools built by the OpenAI and Anthropic adapters.

The adapters turn the ``tools`` definitions an application sends to the model
into toolspan tools (schema from the definition, side effects from its
``Declarations``); the kit checks them as any other. Here the key travels as
README §2's ``send_idempotency_key()`` header, declared ``key_passed``: the
check finds the double refund when the client lacks the hook, not with it.
"""

from __future__ import annotations

import json

import httpx
import pytest

from toolspan.testing import FaultKit, check
from toolspan.tracer import Executor, raise_for_httpx_status, send_idempotency_key
from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.integrations import anthropic as anthropic_adapter
from toolspan.tracer.integrations import openai as openai_adapter

SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
    "required": ["order_id", "amount_cents"],
}
DEFINITIONS = {
    "openai": [{"type": "function", "function": {"name": "refund_order", "parameters": SCHEMA}}],
    "anthropic": [{"name": "refund_order", "input_schema": SCHEMA}],
}
ADAPTERS = {"openai": openai_adapter, "anthropic": anthropic_adapter}


def _build(adapter: str, *, hooked: bool):
    def build(kit: FaultKit) -> Executor:
        def payments_api(request: httpx.Request) -> httpx.Response:
            order_id = json.loads(request.content)["order_id"]
            kit.ledger.commit("refund", order_id, key=request.headers.get("Idempotency-Key"))
            return httpx.Response(201, json={"order_id": order_id})

        hooks = {"request": [send_idempotency_key()]} if hooked else {}
        payments = httpx.Client(
            base_url="https://payments.example",
            transport=kit.httpx_transport(payments_api),
            event_hooks=hooks,
        )

        def refund_order(order_id: str, amount_cents: int) -> dict:
            response = payments.post(
                "/refunds", json={"order_id": order_id, "amount_cents": amount_cents}
            )
            return raise_for_httpx_status(response)

        declarations = Declarations(
            {
                "refund_order": Declaration.write(
                    idempotent=True, key_passed="Idempotency-Key header"
                )
            }
        )
        tools = ADAPTERS[adapter].tools_from_definitions(
            DEFINITIONS[adapter], {"refund_order": refund_order}, declarations
        )
        return Executor(tools, **kit.executor_options())

    return build


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_an_adapter_tool_whose_client_lacks_the_key_hook_is_found(adapter):
    report = check(_build(adapter, hooked=False))
    assert {row.scenario for row in report.unsafe} == {
        "timeout after commit",
        "late commit 0.5 s",
        "timeout after commit, twice,",
    }
    assert "declared as passed by Idempotency-Key header" in report.unsafe[0].fix


@pytest.mark.parametrize("adapter", sorted(ADAPTERS))
def test_with_the_hook_the_key_reaches_the_service_and_the_check_passes(adapter):
    report = check(_build(adapter, hooked=True))
    assert not report.unsafe
    assert {row.scenario: row.status for row in report.rows}["timeout after commit"] == "succeeded"
