"""The structured result every call returns, how it is packaged, and its renderings for models."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

from ._canonical import MAX_DEPTH, renderable

if TYPE_CHECKING:  # _next derives its retry-later statuses from this module
    from ._next import Next

__all__ = ["RETRYABLE_STATUSES", "Status", "ToolResult"]

Status = Literal[
    "succeeded",
    "permanent_error",
    "unsafe_retry",
    "attempt_limit",
    "wait_budget",
    "deadline_exceeded",
    "invalid_arguments",
    "invalid_response",
    "unknown_tool",
    "idempotency_conflict",
    "in_progress",
    "turn_budget",
    "loop_blocked",
    "store_unavailable",
    "read_back_required",
    "retry_budget",
    "circuit_open",
    "quarantined",
]

# The final statuses after which the same call may succeed later: budgets and
# limits that reset, and guards waiting for another worker or for the store.
RETRYABLE_STATUSES: frozenset[str] = frozenset(
    {
        "attempt_limit",
        "wait_budget",
        "deadline_exceeded",
        "in_progress",
        "store_unavailable",
        "read_back_required",
        "retry_budget",
        "circuit_open",
    }
)


@dataclass(frozen=True, init=False)
class ToolResult:
    """What the agent gets back: an outcome, never an invented value.

    ``data`` is set on success only. ``retryable`` tells the agent whether
    the same call may succeed later; ``retry_after_s`` is a server delay
    that did not fit the wait budget, so the caller can reschedule.
    ``next`` (see :mod:`toolspan.tracer._next`) tells the model what it may
    do now: which tool answers "did the write happen?", which tools to use
    after a semantic failure, when to try again.
    """

    ok: bool
    status: Status
    tool: str
    call_id: str
    error_code: str | None = None
    retryable: bool = False
    data: Any = None
    message: str = ""
    attempts: int = 0
    total_wait_s: float = 0.0
    retry_after_s: float | None = None
    truncated: bool = False
    replayed: bool = False
    reconciled: bool = False
    next: Next | None = None

    def __init__(
        self,
        ok: bool,
        status: Status,
        tool: str,
        call_id: str,
        error_code: str | None = None,
        retryable: bool = False,
        data: Any = None,
        message: str = "",
        attempts: int = 0,
        total_wait_s: float = 0.0,
        retry_after_s: float | None = None,
        truncated: bool = False,
        replayed: bool = False,
        reconciled: bool = False,
        next: Next | None = None,
    ) -> None:
        # Every call builds one, so this replaces the generated frozen
        # ``__init__`` (one ``object.__setattr__`` per field, three times
        # slower): the fields go straight into the instance dict, which users'
        # attribute assignment cannot reach (``FrozenInstanceError``).
        fields = self.__dict__
        fields["ok"] = ok
        fields["status"] = status
        fields["tool"] = tool
        fields["call_id"] = call_id
        fields["error_code"] = error_code
        fields["retryable"] = retryable
        fields["data"] = data
        fields["message"] = message
        fields["attempts"] = attempts
        fields["total_wait_s"] = total_wait_s
        fields["retry_after_s"] = retry_after_s
        fields["truncated"] = truncated
        fields["replayed"] = replayed
        fields["reconciled"] = reconciled
        fields["next"] = next

    def to_dict(self) -> dict[str, Any]:
        """The JSON object the model sees (flags only when they are set)."""
        body: dict[str, Any] = {
            "ok": self.ok,
            "status": self.status,
            "error_code": self.error_code,
            "retryable": self.retryable,
            "message": self.message,
            "attempts": self.attempts,
            "total_wait_s": self.total_wait_s,
        }
        if self.ok:
            body["data"] = self.data
        if self.retry_after_s is not None:
            body["retry_after_s"] = self.retry_after_s
        for flag in ("truncated", "replayed", "reconciled"):
            if getattr(self, flag):
                body[flag] = True
        if self.next is not None:
            body["next"] = self.next.to_dict()
        return body

    def to_json(self) -> str:
        """:meth:`to_dict` as compact JSON text."""
        return orjson.dumps(self.to_dict(), default=str).decode()

    def to_openai_message(self) -> dict[str, Any]:
        """A Chat Completions ``role: tool`` message answering the call."""
        return {"role": "tool", "tool_call_id": self.call_id, "content": self.to_json()}

    def to_anthropic_block(self) -> dict[str, Any]:
        """A Messages ``tool_result`` content block answering the call."""
        return {
            "type": "tool_result",
            "tool_use_id": self.call_id,
            "content": self.to_json(),
            "is_error": not self.ok,
        }


# -- packaging ---------------------------------------------------------------------


# The name results were built by when ToolResult's own constructor was slow;
# it is that constructor now.
build_result = ToolResult


def package(value: Any, max_bytes: int) -> tuple[Any, bytes, str, bool, str]:
    """A successful value as the result carries it: ``(data, encoded,
    result_hash, truncated, message)``.

    ``encoded`` (canonical JSON) is what the idempotency store keeps for a
    replay and ``result_hash`` what the call span records; ``data`` is the
    value itself, or a valid-UTF-8 preview of its JSON when over ``max_bytes``.
    A value the renderers could not encode (keys that are not strings,
    integers past 64 bits, deep nesting) is carried in its :func:`json_safe` shape.
    """
    value, encoded, cut = renderable(value)
    result_hash = hashlib.sha256(encoded).hexdigest()
    if len(encoded) <= max_bytes:
        message = f"result nested deeper than {MAX_DEPTH} levels" if cut else "ok"
        return value, encoded, result_hash, cut, message
    preview = cap_text(encoded, max_bytes)
    message = f"result truncated from {len(encoded)} to {max_bytes} bytes"
    return preview, encoded, result_hash, True, message


def cap_text(text: str | bytes, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` of UTF-8, on a character boundary."""
    data = text.encode("utf-8", errors="replace") if isinstance(text, str) else text
    if len(data) <= max_bytes:
        return text if isinstance(text, str) else data.decode("utf-8", errors="replace")
    return data[:max_bytes].decode("utf-8", errors="ignore")
