"""``toolspan.testing``: prove a tool is safe to retry before production.

Point your tools' HTTP client at a fake of the service, put the kit's
fault-injecting transport in between, and count what really happened::

    kit = FaultKit([Fault.timeout_after_commit()])
    payments = httpx.Client(base_url="https://payments.example",
                            transport=kit.httpx_transport(fake_payments))
    executor = Executor([refund], **kit.executor_options())
    executor.execute(call)
    kit.settle()                        # late commits land
    assert kit.ledger.max_per_resource() == 1

The fake service records each side effect with ``kit.ledger.commit(...)``.
Nothing sleeps for real: slow answers, backoff and late commits all move the
kit's :class:`FakeClock`. httpx and httpx2 are imported only by the
transports that need them. ``toolspan check MODULE:BUILD`` runs every tool
through a fault matrix (:func:`check`), and the pytest plugin gives the
``toolspan_faults``, ``effect_ledger`` and ``fake_clock`` fixtures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolspan.tracer.testing import FakeClock

from ._check import FAULT_MATRIX, CheckReport, CheckRow, CheckTarget, Scenario, check, format_report
from ._faultkit import FaultKit
from ._faults import EffectLedger, Fault, FaultKind, FaultPlan

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = [
    "FAULT_MATRIX",
    "CheckReport",
    "CheckRow",
    "CheckTarget",
    "EffectLedger",
    "FakeClock",
    "Fault",
    "FaultKind",
    "FaultKit",
    "FaultPlan",
    "Scenario",
    "check",
    "format_report",
    "mcp_proxy_target",
]


def mcp_proxy_target(
    kit: FaultKit,
    server: Any,
    config: Mapping[str, Any],
    *,
    arguments: Mapping[str, Mapping[str, Any]] | None = None,
) -> CheckTarget:
    """A :class:`CheckTarget` for an MCP server (``MCPServer``) through ``toolspan mcp
    proxy`` with ``config`` (its TOML as a mapping): the kit's faults on the link
    between the proxy and the server, one per ``tools/call`` (``mcp`` is imported
    only here)."""
    from ._fault_mcp import proxy_target

    return proxy_target(kit, server, config, arguments=arguments)
