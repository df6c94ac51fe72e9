"""Hooks: observe every attempt and every final result.

A hook is any object with ``on_attempt`` and ``on_call`` methods taking the
frozen events below. The executor calls them after the spans are written and
never lets a failing hook break the tool call. Metrics are one such hook
(:class:`toolspan.tracer.MetricsHook`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ._result import ToolResult

__all__ = ["AttemptEvent", "CallEvent", "Hook"]


@dataclass(frozen=True, slots=True)
class AttemptEvent:
    """One attempt finished: ``outcome`` is ``ok`` or the error code."""

    tool: str
    call_id: str
    attempt: int
    outcome: str
    delay_s: float
    total_wait_s: float


@dataclass(frozen=True, slots=True)
class CallEvent:
    """A logical call reached its final result."""

    result: ToolResult


class Hook(Protocol):
    """Receives execution events; must not block for long."""

    def on_attempt(self, event: AttemptEvent) -> None: ...

    def on_call(self, event: CallEvent) -> None: ...
