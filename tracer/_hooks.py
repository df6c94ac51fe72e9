"""Hooks: observe every attempt and every final result.

A hook is any object with ``on_attempt`` and ``on_call`` methods taking the
frozen events below. The executor calls them after the spans are written and
never lets a failing hook break the tool call. Metrics are one such hook
(:class:`toolspan.tracer.MetricsHook`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ._result import ToolResult

__all__ = ["AttemptEvent", "CallEvent", "Hook"]

_log = logging.getLogger("toolspan.tracer")


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


def dispatch_attempt(
    hooks: Sequence[Hook],
    tool: str,
    call_id: str,
    attempt: int,
    outcome: str,
    delay_s: float,
    total_wait_s: float,
) -> None:
    """Tell every hook that an attempt finished (callers skip this without hooks)."""
    event = AttemptEvent(tool, call_id, attempt, outcome, delay_s, total_wait_s)
    for hook in hooks:
        _safely(hook.on_attempt, event)


def dispatch_call(hooks: Sequence[Hook], result: ToolResult) -> None:
    """Tell every hook that a call reached its final result."""
    event = CallEvent(result)
    for hook in hooks:
        _safely(hook.on_call, event)


def _safely(fn: Callable[[Any], None], event: Any) -> None:
    # Telemetry must never break a tool call.
    try:
        fn(event)
    except Exception:
        _log.exception("toolspan hook %r failed; the tool call is unaffected", fn)
