"""The tool call being executed, visible to the tool function and what it calls.

A context variable (set by the executor around each attempt), so a tool's
HTTP client hook (:func:`~toolspan.tracer.send_idempotency_key`) can read the
call's key without the tool passing it along.
"""

from __future__ import annotations

import contextvars

from ._tool import ToolCall

__all__ = ["CURRENT_CALL", "current_call"]

CURRENT_CALL: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "toolspan_current_call", default=None
)


def current_call() -> ToolCall | None:
    """The tool call being executed, inside a tool function (else ``None``).

    Its ``idempotency_key`` is the call's key. A tool function that declares an
    ``idempotency_key`` parameter receives it directly; an httpx client built
    with :func:`~toolspan.tracer.send_idempotency_key` sends it as a header.
    """
    return CURRENT_CALL.get()
