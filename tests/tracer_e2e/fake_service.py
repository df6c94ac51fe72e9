"""A deterministic stand-in for a remote bike-share API, and its tools.

Failures are scripted per dock: each call to a dock first consumes the
errors queued for it, then answers. The service records what it received,
so tests can check the tool saw the original (unredacted) arguments.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from typing import Any

from toolspan.tracer import Executor, Tool, ToolError
from toolspan.tracer.testing import FakeClock

DOCK_STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "dock_id": {"type": "string", "minLength": 1},
        "api_key": {"type": "string"},
        "note": {"type": "string"},
    },
    "required": ["dock_id"],
    "additionalProperties": False,
}

HOLD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "dock_id": {"type": "string"},
        "rider_id": {"type": "string"},
    },
    "required": ["dock_id", "rider_id"],
    "additionalProperties": False,
}


class FakeBikeShare:
    """Scripted failures per dock, then a fixed answer."""

    def __init__(self) -> None:
        self._failures: defaultdict[str, deque[ToolError]] = defaultdict(deque)
        self.received: list[dict[str, Any]] = []
        self.holds: dict[str, str] = {}

    def fail_next(self, dock_id: str, *errors: ToolError) -> None:
        self._failures[dock_id].extend(errors)

    def _answer_or_fail(self, dock_id: str, arguments: dict[str, Any]) -> None:
        self.received.append(arguments)
        if self._failures[dock_id]:
            raise self._failures[dock_id].popleft()

    def get_dock_status(self, dock_id: str, **extra: Any) -> dict[str, Any]:
        self._answer_or_fail(dock_id, {"dock_id": dock_id, **extra})
        return {"dock_id": dock_id, "bikes_available": 3, "docks_free": 5, "open": True}

    def hold_bicycle(self, dock_id: str, rider_id: str) -> dict[str, Any]:
        self._answer_or_fail(dock_id, {"dock_id": dock_id, "rider_id": rider_id})
        hold_id = self.holds.setdefault(f"{dock_id}/{rider_id}", f"H-{len(self.holds) + 1}")
        return {"hold_id": hold_id, "dock_id": dock_id, "expires_in_s": 600}

    def tools(self) -> list[Tool]:
        return [
            Tool(
                name="get_dock_status",
                fn=self.get_dock_status,
                side_effect="none",
                parameters=DOCK_STATUS_SCHEMA,
                schema_version="2",
            ),
            Tool(
                name="hold_bicycle",
                fn=self.hold_bicycle,
                side_effect="write",
                idempotent=True,
                key_passed="scripted",
                parameters=HOLD_SCHEMA,
            ),
        ]


def executor_for(
    service: FakeBikeShare, tracer_provider: Any, seed: int
) -> tuple[Executor, FakeClock]:
    """An executor over ``service``'s tools that never sleeps for real."""
    clock = FakeClock()
    executor = Executor(
        service.tools(),
        tracer_provider=tracer_provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(seed),
    )
    return executor, clock
