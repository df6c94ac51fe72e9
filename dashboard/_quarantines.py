"""The Quarantines page's data: the ``TOOLSPAN_STORE`` store's quarantines as a
table, and lifting them (``toolspan.tracer.lift_quarantines``).

The store is opened for each read or lift and closed after it: a page run is
rare next to an executor's calls, and a store that went down and came back is
simply read again on the next run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pandas as pd

from .._errors import QuarantineStoreError, ToolspanError
from ..tracer import Quarantine, lift_quarantines, list_quarantines
from ..tracer.store import IdempotencyStore, open_store
from ._env import STORE_ENV

__all__ = ["COLUMNS", "QuarantineStoreError", "lift", "load", "store_label", "store_location"]

COLUMNS = (
    "id",
    "scope",
    "conversation",
    "tool",
    "resource",
    "call",
    "reason",
    "finding",
    "created",
    "expires in",
)
# user:password@ in a Redis URL: never shown on the page.
_USERINFO = re.compile(r"(?<=://)[^@/]*@")


def store_location() -> str | None:
    """The configured store (``TOOLSPAN_STORE``), or None."""
    return os.environ.get(STORE_ENV) or None


def store_label(location: str) -> str:
    """The location as the page may show it: without a URL's credentials."""
    return _USERINFO.sub("***@", location)


@contextmanager
def _opened(location: str) -> Iterator[IdempotencyStore]:
    try:
        store = open_store(location)
    except ToolspanError as exc:
        raise QuarantineStoreError(f"cannot open the store: {exc}") from exc
    try:
        yield store
    except ToolspanError as exc:
        raise QuarantineStoreError(f"the store failed: {exc}") from exc
    finally:
        store.close()


def load(location: str, *, now: Callable[[], float] | None = None) -> pd.DataFrame:
    """The quarantines in force, one row each, the newest first."""
    with _opened(location) as store:
        moment = None if now is None else now()
        quarantines = list_quarantines(store, now=moment)
        reference = _store_now(store) if moment is None else moment
    rows = [_row(q, reference) for q in sorted(quarantines, key=lambda q: -q.since)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def lift(location: str, ids: set[str] | None) -> list[Quarantine]:
    """Lift these quarantines (every one when ``ids`` is None); return those lifted."""
    with _opened(location) as store:
        return lift_quarantines(store, ids)


def _store_now(store: IdempotencyStore) -> float:
    # Expiry counts on the store's clock, as list_quarantines does.
    clock = getattr(store, "now", None)
    return float(clock()) if callable(clock) else datetime.now(UTC).timestamp()


def _row(q: Quarantine, now: float) -> dict[str, object]:
    return {
        "id": q.id,
        "scope": q.scope,
        "conversation": q.conversation_id,
        "tool": q.tool,
        "resource": q.resource,
        "call": q.call_identity,
        "reason": q.reason,
        "finding": q.finding,
        "created": datetime.fromtimestamp(q.since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if q.since
        else None,
        "expires in": _duration(q.until - now),
    }


def _duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 05 min``, ``2 d 04 h``."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole} s"
    minutes, _ = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours:02d} h"
