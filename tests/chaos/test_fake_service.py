"""The chaos test's fake service does what the chaos test counts on."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.chaos.fake_service import COMMITTING_FAULTS, FAULTS, Ledger, LedgerService, fault_for
from toolspan.tracer import ToolError


def test_every_fault_occurs_and_calm_follows() -> None:
    schedule = [fault_for(f"order-{n:04d}", attempt) for n in range(200) for attempt in (1, 2)]
    assert set(schedule) == set(FAULTS)
    assert fault_for("order-0001", 6) == "ok"  # from then on every action can finish


def _charge_until_ok(service: LedgerService, order_id: str, key: str) -> None:
    for _ in range(10):
        try:
            service.charge(order_id, 100, key)
            return
        except (TimeoutError, ToolError):
            continue
    pytest.fail("the service never answered")


@pytest.mark.parametrize("honours_keys", [False, True])
def test_the_legacy_api_commits_every_time_and_the_keyed_one_once(
    tmp_path: Path, honours_keys: bool
) -> None:
    ledger = Ledger.create(tmp_path / "ledger.db")
    service = LedgerService(ledger, honours_keys=honours_keys)
    for _ in range(3):  # the same request three times, as a naive retry would send it
        _charge_until_ok(service, "order-0007", "key-7")
    requests = _requests(ledger)
    committing = sum(requests[("charge", fault)] for fault in COMMITTING_FAULTS)
    charges = ledger.rows("charges")
    assert len(charges) == (1 if honours_keys else committing)
    assert len(charges) >= 1 and committing >= 3
    assert service.charge_status("order-0007") is not None
    assert service.charge_status("order-0008") is None


def _requests(ledger: Ledger) -> Counter[tuple[str, str]]:
    return Counter({(kind, fault): n for kind, fault, n in ledger.rows("requests_by_fault")})
