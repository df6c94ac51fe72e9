"""toolspan.tracer — the retry boundary for LLM tool executors.

Declare each tool once, hand every tool call the model makes to an
:class:`Executor`, and put the structured :class:`ToolResult` into the
model's next message. Every logical call and every attempt becomes an
OpenTelemetry span (see ``docs/trace-contract.md``).

Library code here depends on ``opentelemetry-api`` only; set up the SDK and
exporters with :func:`setup_telemetry` (extra ``toolspan[otel]``).
"""

from __future__ import annotations

from ._adapters import (
    from_httpx,
    from_httpx_response,
    raise_for_httpx_status,
    send_idempotency_key,
    send_idempotency_key_async,
    to_tool_error,
)
from ._attributes import CONTRACT_VERSION
from ._breaker import CircuitBreaker
from ._budget import RetryBudget
from ._canonical import canonical_json
from ._capture import Capture
from ._errors import ConfigurationError, ToolError, ToolspanError
from ._executor import AsyncExecutor, Executor, current_call
from ._hooks import AttemptEvent, CallEvent, Hook
from ._metrics import MetricsHook
from ._policy import (
    AMBIGUOUS_CODES,
    DEFAULT_RETRYABLE_CODES,
    Decision,
    RetryPolicy,
    parse_retry_after,
)
from ._quarantine import Quarantine, add_quarantine, lift_quarantines, list_quarantines
from ._redact import REDACTED, Redactor
from ._result import Status, ToolResult
from ._run import AgentRun
from ._safeguards import Safeguards
from ._setup import Telemetry, setup_telemetry
from ._tool import DEFAULT_COMMIT_WINDOW_S, NOT_PENDING, SideEffect, Tool, ToolCall, tool
from ._transcript import TranscriptShape, compact_transcript
from ._version import __version__

__all__ = [
    "AMBIGUOUS_CODES",
    "CONTRACT_VERSION",
    "DEFAULT_COMMIT_WINDOW_S",
    "DEFAULT_RETRYABLE_CODES",
    "NOT_PENDING",
    "REDACTED",
    "AgentRun",
    "AsyncExecutor",
    "AttemptEvent",
    "CallEvent",
    "Capture",
    "CircuitBreaker",
    "ConfigurationError",
    "Decision",
    "Executor",
    "Hook",
    "MetricsHook",
    "Quarantine",
    "Redactor",
    "RetryBudget",
    "RetryPolicy",
    "Safeguards",
    "SideEffect",
    "Status",
    "Telemetry",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolspanError",
    "TranscriptShape",
    "__version__",
    "add_quarantine",
    "canonical_json",
    "compact_transcript",
    "current_call",
    "from_httpx",
    "from_httpx_response",
    "lift_quarantines",
    "list_quarantines",
    "parse_retry_after",
    "raise_for_httpx_status",
    "send_idempotency_key",
    "send_idempotency_key_async",
    "setup_telemetry",
    "to_tool_error",
    "tool",
]
