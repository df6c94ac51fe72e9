"""README §2's refund tool, as ``toolspan check`` targets: two unsafe variants, two fixed.

Each ``build_*`` is what a user writes once: the README's tool code, with its
httpx client on the kit's fault transport in front of a fake payments API.
``toolspan check tests.testing.refund_checks:build_key_not_passed`` exits 1.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from toolspan.testing import FaultKit
from toolspan.tracer import Executor, Tool, raise_for_httpx_status


class FakePayments:
    """POST /refunds and GET /refunds/{order_id}; every refund goes into the kit's ledger."""

    def __init__(self, kit: FaultKit, *, honours_keys: bool) -> None:
        self.kit = kit
        self.honours_keys = honours_keys
        self.refunds: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/refunds":
            body = json.loads(request.content)
            key = request.headers.get("Idempotency-Key") if self.honours_keys else None
            if self.kit.ledger.commit("refund", body["order_id"], key=key):
                self.refunds.append({"refund_id": f"rf-{len(self.refunds) + 1}", **body})
            return httpx.Response(201, json=self.refunds[-1])
        if request.method == "GET" and request.url.path.startswith("/refunds/"):
            order_id = request.url.path.removeprefix("/refunds/")
            found = [r for r in self.refunds if r["order_id"] == order_id]
            return httpx.Response(200, json=found[-1]) if found else httpx.Response(404)
        return httpx.Response(404)


def _build(
    kit: FaultKit, *, honours_keys: bool, sends_key: bool, read_back: bool, keyed: bool = True
) -> Executor:
    payments = httpx.Client(
        base_url="https://payments.example",
        timeout=5,
        transport=kit.httpx_transport(FakePayments(kit, honours_keys=honours_keys)),
    )

    def refund_order(order_id: str, amount_cents: int, idempotency_key: str) -> dict:
        headers = {"Idempotency-Key": idempotency_key} if sends_key else {}
        response = payments.post(
            "/refunds", json={"order_id": order_id, "amount_cents": amount_cents}, headers=headers
        )
        return raise_for_httpx_status(response)

    def get_refund(order_id: str, amount_cents: int) -> dict | None:
        response = payments.get(f"/refunds/{order_id}")
        return response.json() if response.status_code == 200 else None

    def refund_order_unkeyed(order_id: str, amount_cents: int) -> dict:
        response = payments.post(
            "/refunds", json={"order_id": order_id, "amount_cents": amount_cents}
        )
        return raise_for_httpx_status(response)

    refund = Tool(
        "refund_order",
        refund_order if keyed else refund_order_unkeyed,
        side_effect="write",
        idempotent=keyed,
        read_back=get_refund if read_back else None,
        resource_key=lambda args: args["order_id"],
    )
    return Executor([refund], **kit.executor_options())


def build_key_not_passed(kit: FaultKit) -> Executor:
    """The key is a parameter, but the request never carries it (and no read-back)."""
    return _build(kit, honours_keys=True, sends_key=False, read_back=False)


def build_service_ignores_keys(kit: FaultKit) -> Executor:
    """The key is sent, but the payments API does not deduplicate by it."""
    return _build(kit, honours_keys=False, sends_key=True, read_back=False)


def build_key_passed(kit: FaultKit) -> Executor:
    """Fixed: the key is sent to a service that honours it."""
    return _build(kit, honours_keys=True, sends_key=True, read_back=False)


def build_read_back(kit: FaultKit) -> Executor:
    """Fixed for a service that ignores keys: no key claimed, README §2's read-back."""
    return _build(kit, honours_keys=False, sends_key=False, read_back=True, keyed=False)


def build_as_in_the_readme(kit: FaultKit) -> Executor:
    """README §2 exactly: the key sent and honoured, and a read-back."""
    return _build(kit, honours_keys=True, sends_key=True, read_back=True)
