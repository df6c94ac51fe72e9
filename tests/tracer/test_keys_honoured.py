"""keys_honoured: what a service does with idempotency keys, warned about, recorded and checked."""

from __future__ import annotations

import logging
import uuid

import httpx
import pytest

from toolspan.tracer import ConfigurationError, Tool, ToolCall, raise_for_httpx_status
from toolspan.tracer import send_idempotency_key as key_hook
from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.testing import check_keys_honoured

from ..end_to_end.payments_service import PaymentsService

HEADER = "Idempotency-Key header"


def _name() -> str:
    # The warning is once per tool name per process: every test its own name.
    return f"refund_{uuid.uuid4().hex[:8]}"


def _refund(**_: object) -> dict:
    return {"refund_id": "rf_1"}


def _warnings(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "toolspan.tracer" and r.levelno == logging.WARNING and name in r.getMessage()
    ]


def test_a_keyed_write_nobody_verified_is_warned_about_once_per_name(caplog):
    name = _name()
    with caplog.at_level(logging.WARNING, logger="toolspan.tracer"):
        for _ in range(3):
            Tool(name, _refund, side_effect="write", idempotent=True, key_passed=HEADER)
    (message,) = _warnings(caplog, name)
    assert message.startswith(
        f"{name} relies on the service honouring Idempotency-Key; add read_back or declare "
        "keys_honoured=True"
    )


def test_keys_honoured_false_is_warned_about_too(caplog):
    name = _name()
    with caplog.at_level(logging.WARNING, logger="toolspan.tracer"):
        Tool(
            name,
            _refund,
            side_effect="write",
            idempotent=True,
            key_passed="body field",
            keys_honoured=False,
        )
    (message,) = _warnings(caplog, name)
    assert "its idempotency key (body field)" in message


@pytest.mark.parametrize(
    "options",
    [{"keys_honoured": True}, {"read_back": lambda **_: None}],
    ids=["keys_honoured", "read_back"],
)
def test_keys_honoured_or_a_read_back_silences_the_warning(caplog, options):
    name = _name()
    with caplog.at_level(logging.WARNING, logger="toolspan.tracer"):
        Tool(name, _refund, side_effect="write", idempotent=True, key_passed=HEADER, **options)
    assert _warnings(caplog, name) == []


def test_a_declaration_carries_keys_honoured_into_the_tool(caplog):
    name = _name()
    declarations = Declarations(
        {name: Declaration.write(idempotent=True, key_passed=HEADER, keys_honoured=True)}
    )
    with caplog.at_level(logging.WARNING, logger="toolspan.tracer"):
        declared = declarations.tool(name, _refund)
    assert declared.keys_honoured is True
    assert _warnings(caplog, name) == []
    assert Declarations.from_tools([declared]).get(name).keys_honoured is True


def test_keys_honoured_is_for_idempotent_writes_and_a_bool():
    with pytest.raises(ConfigurationError, match="keys_honoured is for idempotent writes"):
        Tool(_name(), _refund, side_effect="write", keys_honoured=True)
    with pytest.raises(ConfigurationError, match="keys_honoured is for idempotent writes"):
        Declaration.write(keys_honoured=False)
    with pytest.raises(ConfigurationError, match="keys_honoured must be True, False or None"):
        Tool(
            _name(),
            _refund,
            side_effect="write",
            idempotent=True,
            key_passed=HEADER,
            keys_honoured="yes",
        )  # type: ignore[arg-type]


@pytest.mark.parametrize(("declared", "recorded"), [(True, "true"), (False, "false"), (None, None)])
def test_the_declaration_is_recorded_on_both_spans(make_executor, spans, declared, recorded):
    refund = Tool(
        "refund_order",
        _refund,
        side_effect="write",
        idempotent=True,
        key_passed=HEADER,
        keys_honoured=declared,
    )
    make_executor([refund]).execute(
        ToolCall("refund_order", "c1", {}, "cv", request_id="r1", idempotency_key="k1")
    )
    for span in [spans.call(), *spans.attempts()]:
        assert spans.attrs(span).get("toolspan.tool.keys_honoured") == recorded


# -- the contract test users run against their service ----------------------------------


def _refund_tool(service: PaymentsService) -> Tool:
    client = httpx.Client(base_url=service.url, event_hooks={"request": [key_hook()]})

    def refund_order(order_id: str, amount: int) -> dict:
        return raise_for_httpx_status(
            client.post("/refunds", json={"order_id": order_id, "amount": amount})
        )

    return Tool(
        "refund_order",
        refund_order,
        side_effect="write",
        idempotent=True,
        key_passed=HEADER,
        keys_honoured=True,
    )


def test_the_contract_test_passes_for_a_service_that_honours_keys():
    with PaymentsService(honours_keys=True) as service:
        check_keys_honoured(
            _refund_tool(service),
            {"order_id": "A-1", "amount": 5},
            lambda: len(service.refunds("A-1")),
        )
        assert len(service.refunds("A-1")) == 1
        first, second = service.keys_seen
        assert first == second and first is not None  # the same key went out twice


def test_the_contract_test_fails_for_a_service_that_ignores_keys():
    with PaymentsService(honours_keys=False) as service:
        with pytest.raises(AssertionError, match="applied one idempotency key 2 times"):
            check_keys_honoured(
                _refund_tool(service),
                {"order_id": "A-1", "amount": 5},
                lambda: len(service.refunds("A-1")),
            )


def test_the_contract_test_refuses_to_prove_nothing():
    with PaymentsService(honours_keys=True) as service:
        with pytest.raises(AssertionError, match="left 0 effects instead of 1"):
            check_keys_honoured(
                _refund_tool(service),
                {"order_id": "A-1", "amount": 5},
                lambda: len(service.refunds("other")),
            )


def test_the_contract_test_passes_the_key_parameter_too():
    applied: dict[str, int] = {}

    def refund_order(order_id: str, idempotency_key: str | None = None) -> None:
        applied.setdefault(str(idempotency_key), 1)

    declared = Tool(
        "refund_order", refund_order, side_effect="write", idempotent=True, keys_honoured=True
    )
    check_keys_honoured(declared, {"order_id": "A-1"}, lambda: len(applied))
    (key,) = applied
    assert key.startswith("toolspan-contract-")


@pytest.mark.parametrize("route", ["parameter", "current_call"])
def test_the_examples_payments_api_honours_keys_as_they_declare(route):
    # The contract test behind keys_honoured=True in examples/ (support_desk, frameworks,
    # mcp_agent): the same key twice refunds once, by either route the key takes.
    from examples.support_desk import SupportDesk, support_tools

    desk = SupportDesk()
    if route == "parameter":
        (refund,) = [t for t in support_tools(desk) if t.name == "refund_order"]
    else:
        refund = Tool(
            "refund_order",
            desk.refund_order,
            side_effect="write",
            idempotent=True,
            key_passed="Idempotency-Key, from current_call()",
            keys_honoured=True,
        )
    assert refund.keys_honoured is True
    check_keys_honoured(
        refund,
        {"order_id": "A-1001", "amount_cents": 4900, "reason": "broken"},
        lambda: desk.side_effects["refund:A-1001"],
    )
