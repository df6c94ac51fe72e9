"""The pytest plugin of ``toolspan.testing`` (entry point ``pytest11``: ``toolspan``).

Fixtures: ``toolspan_faults`` (a fresh :class:`~toolspan.testing.FaultKit`),
``effect_ledger`` and ``fake_clock`` (that kit's ledger and clock, so a test
asking for all three gets one shared set). Mark a test
``@pytest.mark.toolspan_faults(Fault.timeout_after_commit(), ...)`` to give
its kit those faults for the first requests.

pytest loads this module in every run where toolspan is installed, so it
imports nothing of toolspan until a test asks for a fixture.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from toolspan.testing import EffectLedger, FakeClock, FaultKit

__all__ = ["effect_ledger", "fake_clock", "pytest_configure", "toolspan_faults"]


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (runs under ``--strict-markers`` too)."""
    config.addinivalue_line(
        "markers",
        "toolspan_faults(*faults, then=None): the faults of the first requests "
        "the toolspan_faults fixture's transports see",
    )


@pytest.fixture
def toolspan_faults(request: pytest.FixtureRequest) -> FaultKit:
    """A fresh fault kit: fake clock, effect ledger, and the marker's faults (if any)."""
    from toolspan.testing import FaultKit

    marker = request.node.get_closest_marker("toolspan_faults")
    if marker is None:
        return FaultKit()
    return FaultKit(marker.args, then=marker.kwargs.get("then"))


@pytest.fixture
def effect_ledger(toolspan_faults: FaultKit) -> EffectLedger:
    """What really happened at the fake service (the kit's ledger)."""
    return toolspan_faults.ledger


@pytest.fixture
def fake_clock(toolspan_faults: FaultKit) -> FakeClock:
    """The kit's clock: slow answers, backoff sleeps and late commits move it."""
    return toolspan_faults.clock
