"""An unknown outcome is read back before any repeat, keyed or not (README §2).

The scripted payments service commits a refund and then loses the response
(a timeout). Whether or not it honours idempotency keys, the ledger must end
with one refund of the order, and the result must say the read-back settled it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from toolspan.tracer import (
    AsyncExecutor,
    ConfigurationError,
    Tool,
    ToolCall,
    ToolError,
    current_call,
    raise_for_httpx_status,
    send_idempotency_key,
    send_idempotency_key_async,
)
from toolspan.tracer.store import derive_key


class Payments:
    """A scripted payments service: each refund commits, the first response is lost.

    ``honours_keys``: a refund whose ``Idempotency-Key`` was seen before returns
    the first refund instead of committing another.
    """

    def __init__(self, *, honours_keys: bool, lose_responses: int = 1) -> None:
        self.honours_keys = honours_keys
        self.lose_responses = lose_responses
        self.ledger: list[dict[str, Any]] = []
        self.keys_seen: list[str | None] = []
        self._by_key: dict[str, dict[str, Any]] = {}

    def refund(self, order_id: str, amount: int, key: str | None = None) -> dict[str, Any]:
        self.keys_seen.append(key)
        if self.honours_keys and key is not None and key in self._by_key:
            refund = self._by_key[key]
        else:
            refund = {"refund_id": f"rf_{len(self.ledger) + 1}", "order_id": order_id}
            refund["amount"] = amount
            self.ledger.append(refund)
            if key is not None:
                self._by_key[key] = refund
        if self.lose_responses:
            self.lose_responses -= 1
            raise ToolError("timeout", "the refund response was lost")
        return refund

    def status(self, order_id: str) -> dict[str, Any] | None:
        found = [r for r in self.ledger if r["order_id"] == order_id]
        return found[-1] if found else None


def refund_call(order_id: str = "R-441") -> ToolCall:
    return ToolCall(
        "refund_order",
        "call_1",
        {"order_id": order_id, "amount": 25},
        conversation_id="conv_1",
        request_id="req_1",
        idempotency_key=derive_key("req_1", f"refund:{order_id}"),
    )


def test_a_keyed_write_that_times_out_is_read_back_not_repeated(make_executor, spans):
    payments = Payments(honours_keys=False)

    def refund_order(order_id: str, amount: int) -> dict[str, Any]:
        return payments.refund(order_id, amount)  # this service ignores keys

    refund = Tool(
        "refund_order",
        refund_order,
        side_effect="write",
        idempotent=True,
        key_passed="ignored by this service",
        read_back=lambda order_id, amount: payments.status(order_id),
    )
    result = make_executor([refund]).execute(refund_call())
    assert (result.status, result.reconciled, result.attempts) == ("succeeded", True, 1)
    assert payments.ledger == [{"refund_id": "rf_1", "order_id": "R-441", "amount": 25}]
    assert result.data == payments.ledger[0]
    assert spans.attrs(spans.call())["toolspan.read_back"] == "found"


def test_a_keyed_write_found_absent_is_repeated_once_under_its_key(make_executor):
    payments = Payments(honours_keys=False)
    reads: list[str] = []

    def refund_order(order_id: str, amount: int) -> dict[str, Any]:
        if not reads:  # the first attempt never reaches the service
            raise ToolError("timeout", "connect timed out")
        return payments.refund(order_id, amount)

    def status(order_id: str, amount: int) -> dict[str, Any] | None:
        reads.append(order_id)
        return payments.status(order_id)

    payments.lose_responses = 0
    refund = Tool(
        "refund_order",
        refund_order,
        side_effect="write",
        idempotent=True,
        key_passed="ignored by this service",
        read_back=status,
    )
    result = make_executor([refund]).execute(refund_call())
    assert (result.status, result.reconciled, result.attempts) == ("succeeded", False, 2)
    assert reads == ["R-441"] and len(payments.ledger) == 1


# -- the key reaches a service that honours it -------------------------------------


def test_the_key_reaches_the_service_through_the_function_parameter(make_executor, spans):
    payments = Payments(honours_keys=True)

    def refund_order(order_id: str, amount: int, idempotency_key: str | None) -> dict[str, Any]:
        return payments.refund(order_id, amount, key=idempotency_key)

    refund = Tool(
        "refund_order",
        refund_order,
        side_effect="write",
        idempotent=True,
        read_back=lambda order_id, amount: payments.status(order_id),
    )
    assert "idempotency_key" not in refund.openai_schema()["function"]["parameters"]["properties"]
    result = make_executor([refund]).execute(refund_call())
    assert (result.status, result.reconciled, len(payments.ledger)) == ("succeeded", True, 1)
    assert payments.keys_seen == [refund_call().idempotency_key]
    call_span = spans.attrs(spans.call())
    assert call_span["toolspan.idempotency.key_passed"] == "idempotency_key parameter"
    assert "idempotency_key" not in call_span["gen_ai.tool.call.arguments"]


def test_without_a_read_back_the_service_deduplicates_the_repeat_by_its_key(make_executor):
    payments = Payments(honours_keys=True)

    def refund_order(order_id: str, amount: int, idempotency_key: str | None) -> dict[str, Any]:
        return payments.refund(order_id, amount, key=idempotency_key)

    refund = Tool("refund_order", refund_order, side_effect="write", idempotent=True)
    result = make_executor([refund]).execute(refund_call())
    assert (result.status, result.attempts, result.reconciled) == ("succeeded", 2, False)
    key = refund_call().idempotency_key
    assert payments.keys_seen == [key, key] and len(payments.ledger) == 1


def test_an_unkeyed_call_passes_none_and_the_model_cannot_set_the_key(make_executor):
    seen: list[str | None] = []

    def refund_order(order_id: str, amount: int, idempotency_key: str | None) -> str:
        seen.append(idempotency_key)
        return "ok"

    executor = make_executor(
        [Tool("refund_order", refund_order, side_effect="write", idempotent=True)]
    )
    unkeyed = ToolCall("refund_order", "c1", {"order_id": "A", "amount": 1}, conversation_id="c")
    assert executor.execute(unkeyed).ok and seen == [None]
    forged = ToolCall(
        "refund_order",
        "c2",
        {"order_id": "A", "amount": 1, "idempotency_key": "chosen-by-the-model"},
        conversation_id="c",
    )
    assert executor.execute(forged).status == "invalid_arguments" and seen == [None]


def test_an_open_ended_function_still_refuses_a_key_from_the_model(make_executor):
    seen: list[str | None] = []

    def note(text: str, idempotency_key: str | None = None, **extra: Any) -> str:
        seen.append(idempotency_key)
        return "ok"

    executor = make_executor([Tool("note", note, side_effect="write", idempotent=True)])
    forged = ToolCall("note", "c1", {"text": "hi", "idempotency_key": "k"}, conversation_id="c")
    result = executor.execute(forged)
    assert (result.status, seen) == ("invalid_arguments", [])
    assert "idempotency_key" in result.message


# -- through the httpx request hook ---------------------------------------------------


def payments_api(payments: Payments, header: str = "Idempotency-Key") -> httpx.MockTransport:
    """The payments service over HTTP: POST /refunds honours ``Idempotency-Key``
    (its first response is lost after the commit); GET /refunds/{order} reads back."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            found = payments.status(request.url.path.rsplit("/", 1)[-1])
            return httpx.Response(200, json=found) if found else httpx.Response(404)
        body = json.loads(request.content)
        key = request.headers.get(header)
        try:
            refund = payments.refund(body["order_id"], body["amount"], key=key)
        except ToolError:
            raise httpx.ReadTimeout("response lost", request=request) from None
        return httpx.Response(201, json=refund)

    return httpx.MockTransport(handle)


def _http_refund_tool(payments: Payments, *, read_back: bool) -> Tool:
    client = httpx.Client(
        transport=payments_api(payments),
        base_url="https://payments.test",
        event_hooks={"request": [send_idempotency_key()]},
    )

    def refund_order(order_id: str, amount: int) -> Any:
        response = client.post("/refunds", json={"order_id": order_id, "amount": amount})
        return raise_for_httpx_status(response)

    def get_refund_status(order_id: str, amount: int) -> Any:
        response = client.get(f"/refunds/{order_id}")
        return None if response.status_code == 404 else raise_for_httpx_status(response)

    return Tool(
        "refund_order",
        refund_order,
        side_effect="write",
        idempotent=True,
        key_passed="Idempotency-Key header",
        read_back=get_refund_status if read_back else None,
    )


def test_the_key_reaches_the_service_as_a_header(make_executor, spans):
    payments = Payments(honours_keys=True)
    refund = _http_refund_tool(payments, read_back=True)
    result = make_executor([refund]).execute(refund_call())
    assert (result.status, result.reconciled, len(payments.ledger)) == ("succeeded", True, 1)
    assert result.data == payments.ledger[0]
    assert payments.keys_seen == [refund_call().idempotency_key]
    assert spans.attrs(spans.call())["toolspan.idempotency.key_passed"] == "Idempotency-Key header"


def test_without_a_read_back_the_header_lets_the_service_deduplicate(make_executor):
    payments = Payments(honours_keys=True)
    refund = _http_refund_tool(payments, read_back=False)
    result = make_executor([refund]).execute(refund_call())
    assert (result.status, result.attempts, len(payments.ledger)) == ("succeeded", 2, 1)
    key = refund_call().idempotency_key
    assert payments.keys_seen == [key, key]
    # Outside a call, and for an unkeyed call, no header is sent.
    refund.fn(order_id="R-9", amount=1)
    unkeyed = ToolCall("refund_order", "c2", {"order_id": "R-10", "amount": 1}, conversation_id="c")
    assert make_executor([refund]).execute(unkeyed).ok
    assert payments.keys_seen[2:] == [None, None]


def test_the_async_hook_sends_the_key_from_an_async_client():
    payments = Payments(honours_keys=True, lose_responses=0)
    client = httpx.AsyncClient(
        transport=payments_api(payments, "X-Request-Key"),
        base_url="https://payments.test",
        event_hooks={"request": [send_idempotency_key_async("X-Request-Key")]},
    )

    async def refund_order(order_id: str, amount: int) -> Any:
        response = await client.post("/refunds", json={"order_id": order_id, "amount": amount})
        return raise_for_httpx_status(response)

    executor = AsyncExecutor(
        [
            Tool(
                "refund_order",
                refund_order,
                side_effect="write",
                idempotent=True,
                key_passed="X-Request-Key header",
            )
        ],
    )
    result = asyncio.run(executor.execute(refund_call()))
    assert result.ok and payments.keys_seen == [refund_call().idempotency_key]


def test_a_header_name_is_checked():
    with pytest.raises(ConfigurationError, match="header name"):
        send_idempotency_key("Idempotency Key")


# -- an idempotent write must route its key ------------------------------------------


def test_an_idempotent_write_without_a_route_for_its_key_is_refused_at_declaration():
    def refund_order(order_id: str) -> str:
        return "ok"

    with pytest.raises(ConfigurationError) as caught:
        Tool("refund_order", refund_order, side_effect="write", idempotent=True)
    message = str(caught.value)
    for way in ("idempotency_key", "send_idempotency_key()", "key_passed="):
        assert way in message
    with pytest.raises(ConfigurationError, match="key_passed is for idempotent writes"):
        Tool("refund_order", refund_order, side_effect="write", key_passed="header")
    with pytest.raises(ConfigurationError, match="cannot be empty"):
        Tool("refund_order", refund_order, side_effect="write", idempotent=True, key_passed=" ")


def test_the_key_parameter_never_enters_an_explicit_schema():
    def refund_order(order_id: str, idempotency_key: str | None) -> str:
        return "ok"

    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "idempotency_key": {"type": "string"}},
    }
    with pytest.raises(ConfigurationError, match="filled in by the executor"):
        Tool("refund_order", refund_order, side_effect="write", idempotent=True, parameters=schema)


def test_current_call_still_carries_the_key(make_executor):
    seen: list[str | None] = []

    def refund_order(order_id: str, amount: int) -> str:
        call = current_call()
        seen.append(None if call is None else call.idempotency_key)
        return "ok"

    refund = Tool(
        "refund_order", refund_order, side_effect="write", idempotent=True, key_passed="body"
    )
    assert make_executor([refund]).execute(refund_call()).ok
    assert seen == [refund_call().idempotency_key] and current_call() is None
