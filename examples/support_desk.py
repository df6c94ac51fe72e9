"""A deterministic fake of a shop's support back end, and its tools.

The services answer from in-memory data; failures come only from an explicit
fault plan (``{("refund_order", 1): "commit_then_timeout"}`` = the first
refund commits, then its response is lost), so every run is the same. The
refund API honours idempotency keys like a real payments API; the e-mail
API does not (a legacy service), and the cancel API offers a status read-back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolspan.tracer import Tool, ToolError, current_call
from toolspan.tracer.integrations import Declaration, Declarations

__all__ = ["Fault", "SupportDesk", "support_declarations", "support_tools"]

# A fault: an HTTP status to answer, "timeout" (nothing committed),
# "commit_then_timeout" (committed, response lost), or (status, Retry-After).
Fault = int | str | tuple[int, float]

_LATENCY_S = {
    "get_order": 0.09,
    "track_shipment": 0.14,
    "check_inventory": 0.06,
    "refund_order": 0.31,
    "send_email": 0.22,
    "send_sms": 0.18,
    "cancel_order": 0.27,
    "get_cancellation": 0.05,
}


@dataclass
class SupportDesk:
    """The remote services, with a fault plan and a ledger of real side effects."""

    faults: Mapping[tuple[str, int], Fault] = field(default_factory=dict)
    # Called with each request's simulated latency (a fake clock's ``advance``).
    pause: Callable[[float], None] = lambda _seconds: None
    shipment_updates: Mapping[str, list[str]] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    side_effects: Counter[str] = field(default_factory=Counter)
    refunds_by_key: dict[str, dict[str, Any]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    orders: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            "A-1001": {"status": "shipped", "total_cents": 4900, "sku": "BIKE-LIGHT"},
            "A-1002": {"status": "processing", "total_cents": 12900, "sku": "HELMET-M"},
            "A-1003": {"status": "delivered", "total_cents": 2500, "sku": "BELL"},
        }
    )

    def _request(self, tool: str, *, commits: Callable[[], None] | None = None) -> None:
        """One request to the remote service: latency, then the planned fault."""
        self.calls[tool] += 1
        self.pause(_LATENCY_S.get(tool, 0.1))
        fault = self.faults.get((tool, self.calls[tool]))
        if fault in (None, "commit_then_timeout") and commits is not None:
            commits()  # the effect happens before the response can be lost
        if fault is None:
            return
        if fault in ("timeout", "commit_then_timeout"):
            raise TimeoutError(f"{tool}: no response within 2.0 s")
        status, retry_after = fault if isinstance(fault, tuple) else (int(fault), None)
        raise ToolError.from_status(status, f"{tool} answered {status}", retry_after_s=retry_after)

    # -- reads ------------------------------------------------------------------

    def get_order(self, order_id: str) -> dict[str, Any]:
        self._request("get_order")
        if order_id not in self.orders:
            raise ToolError.from_status(404, f"no order {order_id}")
        return {"order_id": order_id, **self.orders[order_id]}

    def track_shipment(self, order_id: str) -> dict[str, Any]:
        self._request("track_shipment")
        updates = self.shipment_updates.get(order_id, ["in_transit"])
        seen = self.calls[f"track:{order_id}"]
        self.calls[f"track:{order_id}"] += 1
        return {"order_id": order_id, "status": updates[min(seen, len(updates) - 1)]}

    def check_inventory(self, sku: str) -> dict[str, Any]:
        self._request("check_inventory")
        return {"sku": sku, "in_stock": 0 if sku == "HELMET-M" else 12}

    # -- writes -----------------------------------------------------------------

    def refund_order(self, order_id: str, amount_cents: int, reason: str) -> dict[str, Any]:
        """For frameworks that call the function themselves: the key from :func:`current_call`."""
        call = current_call()
        key = call.idempotency_key if call is not None else None
        return self.refund_with_key(key, order_id, amount_cents, reason)

    def refund(
        self, order_id: str, amount_cents: int, reason: str, idempotency_key: str | None
    ) -> dict[str, Any]:
        """The refund tool: the executor passes the call's key as ``idempotency_key``."""
        return self.refund_with_key(idempotency_key, order_id, amount_cents, reason)

    def refund_with_key(
        self, key: str | None, order_id: str, amount_cents: int, reason: str
    ) -> dict[str, Any]:
        """The payments API itself: a known ``Idempotency-Key`` replays its stored answer."""
        if key is not None and key in self.refunds_by_key:
            self._request("refund_order")  # the service replays its stored answer
            return self.refunds_by_key[key]
        refund = {"refund_id": f"rf_{order_id}_{amount_cents}", "amount_cents": amount_cents}

        def commit() -> None:
            self.side_effects[f"refund:{order_id}"] += 1
            if key is not None:
                self.refunds_by_key[key] = refund

        self._request("refund_order", commits=commit)
        return refund

    def send_email(self, to: str, subject: str, body: str) -> dict[str, Any]:
        def commit() -> None:
            self.side_effects[f"email:{to}:{subject}"] += 1

        self._request("send_email", commits=commit)
        return {"queued": True, "to": to}

    def send_sms(self, phone: str, text: str) -> dict[str, Any]:
        def commit() -> None:
            self.side_effects[f"sms:{phone}"] += 1

        self._request("send_sms", commits=commit)
        return {"sent": True}

    def cancel_order(self, order_id: str) -> dict[str, Any]:
        self._request("cancel_order", commits=lambda: self._cancel(order_id))
        return {"order_id": order_id, "cancelled": True}

    def _cancel(self, order_id: str) -> None:
        self.side_effects[f"cancel:{order_id}"] += 1
        self.cancelled.add(order_id)

    def get_cancellation(self, order_id: str) -> dict[str, Any] | None:
        self._request("get_cancellation")
        return {"order_id": order_id, "cancelled": True} if order_id in self.cancelled else None


def _object(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_ORDER_ID = {"type": "string", "pattern": "^A-[0-9]{4}$"}


def support_tools(desk: SupportDesk) -> list[Tool]:
    """The tools, declared once: what the model is shown and what the executor checks."""
    by_order: Callable[[Mapping[str, Any]], str] = lambda args: str(args["order_id"])  # noqa: E731
    return [
        Tool(
            "get_order",
            desk.get_order,
            parameters=_object({"order_id": _ORDER_ID}, "order_id"),
            description="Look up an order.",
        ),
        Tool(
            "track_shipment",
            desk.track_shipment,
            parameters=_object({"order_id": _ORDER_ID}, "order_id"),
            description="Where is the parcel?",
        ),
        Tool(
            "check_inventory",
            desk.check_inventory,
            parameters=_object({"sku": {"type": "string"}}, "sku"),
        ),
        Tool(
            "refund_order",
            desk.refund,  # receives the call's key as its idempotency_key parameter
            side_effect="write",
            idempotent=True,  # the payments API honours Idempotency-Key
            # ... which its contract test checks (tests/tracer/test_keys_honoured.py,
            # toolspan.tracer.testing.check_keys_honoured).
            keys_honoured=True,
            resource_key=by_order,
            schema_version="2026-03",
            parameters=_object(
                {
                    "order_id": _ORDER_ID,
                    "amount_cents": {"type": "integer", "minimum": 1},
                    "reason": {"type": "string"},
                },
                "order_id",
                "amount_cents",
                "reason",
            ),
            result_schema=_object(
                {"refund_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
                "refund_id",
            ),
        ),
        Tool(
            "send_email",
            desk.send_email,
            side_effect="write",  # a legacy API: no keys, no read-back
            parameters=_object(
                {
                    "to": {"type": "string"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                },
                "to",
                "subject",
                "body",
            ),
        ),
        Tool(
            "cancel_order",
            desk.cancel_order,
            side_effect="write",
            read_back=desk.get_cancellation,  # "was it cancelled?" settles a lost response
            resource_key=by_order,
            parameters=_object({"order_id": _ORDER_ID}, "order_id"),
        ),
    ]


def support_declarations(desk: SupportDesk) -> Declarations:
    """What the application states about the same tools when a framework or server defines them.

    Name, schema and description come from the framework's (or the MCP
    server's) own definition; only retry safety is stated here. ``send_email``
    is left undeclared on purpose: an undeclared tool is a write that is never
    repeated blind.
    """
    by_order: Callable[[Mapping[str, Any]], str] = lambda args: str(args["order_id"])  # noqa: E731
    return Declarations(
        {
            "get_order": Declaration.read(),
            "track_shipment": Declaration.read(),
            "check_inventory": Declaration.read(),
            # Keyed: derive_key(request_id, "refund_order:<order id>"); refund_order
            # sends the call's key itself (read with current_call()).
            "refund_order": Declaration.write(
                idempotent=True,
                resource_key=by_order,
                key_passed="Idempotency-Key, from current_call()",
                keys_honoured=True,  # checked: tests/tracer/test_keys_honoured.py
            ),
            "cancel_order": Declaration.write(
                read_back=desk.get_cancellation, resource_key=by_order
            ),
        }
    )
