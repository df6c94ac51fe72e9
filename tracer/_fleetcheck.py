"""What `RetryBudget` and `CircuitBreaker` share: checked settings, the store, metrics."""

from __future__ import annotations

import math
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import MeterProvider

from ._errors import ConfigurationError
from ._version import __version__
from .store import IdempotencyStore, MemoryStore
from .store._fleet import FleetState, fleet_state

__all__ = ["SERVICE", "check_at_least", "check_number", "meter", "resolve_store"]

# The metric attribute naming the downstream service (also on call spans).
SERVICE = "toolspan.service"


def check_number(owner: str, name: str, value: Any, *, positive: bool) -> float:
    """A finite number, > 0 when ``positive`` else >= 0; ConfigurationError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(f"{owner}: {name} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        bound = "positive" if positive else "zero or more"
        raise ConfigurationError(f"{owner}: {name} must be {bound}, got {value!r}")
    return float(value)


def check_at_least(owner: str, name: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigurationError(f"{owner}: {name} must be an integer >= {least}, got {value!r}")
    return value


def resolve_store(
    owner: str, store: IdempotencyStore | None
) -> tuple[IdempotencyStore, FleetState]:
    """The store (a fresh MemoryStore when omitted) and the fleet state inside it."""
    chosen: IdempotencyStore = MemoryStore() if store is None else store
    try:
        return chosen, fleet_state(chosen)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{owner}: {exc}") from exc


def meter(meter_provider: MeterProvider | None) -> metrics.Meter:
    return metrics.get_meter("toolspan", __version__, meter_provider=meter_provider)
