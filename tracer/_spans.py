"""The spans of the trace contract: one per logical call, one per attempt.

:class:`SpanWriter` is the only code that starts, fills and ends the
executor's spans (see ``docs/trace-contract.md``), on ``opentelemetry-api``
only. Every helper here is on the hot path, so each does one whole step
(start, close as succeeded, close as failed) in one call, calling the
tracer itself rather than a shared helper.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from . import _attributes as attr
from ._errors import ToolError
from ._result import ToolResult
from ._tool import Tool, ToolCall
from ._version import __version__

__all__ = ["SpanWriter", "base_attributes"]

_ATTEMPT_OK: dict[str, Any] = {attr.ATTEMPT_OUTCOME: "ok", attr.RETRY_DELAY_S: 0.0}
# Statuses are immutable: one instance serves every successful span.
_STATUS_OK = Status(StatusCode.OK)
_INTERNAL = SpanKind.INTERNAL


def base_attributes(call: ToolCall, declared: Tool | None) -> dict[str, Any]:
    """The attributes both spans of a call carry: what the call is and where it belongs."""
    base: dict[str, Any] = {
        attr.TOOL_NAME: call.name,
        attr.TOOL_CALL_ID: call.call_id,
        attr.TOOL_TYPE: "function",
        attr.CONVERSATION_ID: call.conversation_id,
    }
    if call.request_id:
        base[attr.REQUEST_ID] = call.request_id
    if call.turn_id:
        base[attr.TURN_ID] = call.turn_id
    if declared is not None:
        base[attr.SIDE_EFFECT] = declared.side_effect
    if call.idempotency_key:
        base[attr.IDEMPOTENCY_KEY] = call.idempotency_key
        route = None if declared is None else declared.key_route
        if route is not None:
            base[attr.IDEMPOTENCY_KEY_PASSED] = route
    if declared is not None and declared.keys_honoured is not None:
        # What the application states its service does with keys (the analyzer's
        # unverified_keyed_retry reads it).
        base[attr.KEYS_HONOURED] = "true" if declared.keys_honoured else "false"
    if declared is not None and declared.span_attributes:
        # An adapter's protocol attributes (MCP's); they never replace ours.
        base = {**declared.span_attributes, **base}
    return base


def _final_attributes(result: ToolResult, result_hash: str | None) -> dict[str, Any]:
    """What every call span records of its result, successful or not (a
    failure's error code, HTTP status, retry-after and ``next`` come on top)."""
    final: dict[str, Any] = {
        attr.STATUS: result.status,
        attr.RETRYABLE: result.retryable,
        attr.ATTEMPTS: result.attempts,
        attr.TOTAL_WAIT_S: result.total_wait_s,
        attr.IDEMPOTENCY_REPLAYED: result.replayed,
    }
    if result_hash is not None:
        final[attr.RESULT_HASH] = result_hash
    if result.truncated:
        final[attr.RESULT_TRUNCATED] = True
    if result.reconciled:
        final[attr.RECONCILED] = True
    return final


class SpanWriter:
    """Starts and ends the call and attempt spans.

    ``span_clock`` (Unix nanoseconds) stamps the spans instead of the SDK's
    clock, so simulations get timelines that match their fake time.
    """

    __slots__ = ("_clock", "_tracer")

    def __init__(
        self, tracer_provider: TracerProvider | None, span_clock: Callable[[], int] | None
    ) -> None:
        self._tracer = trace.get_tracer(
            attr.SCOPE_NAME, __version__, tracer_provider=tracer_provider
        )
        self._clock = span_clock

    # -- the call span --------------------------------------------------------------

    def start_call(
        self,
        call: ToolCall,
        base: dict[str, Any],
        args_json: str | None,
        args_hash: str = "",
        schema_version: str | None = None,
        service: str | None = None,
    ) -> Span:
        """Open the call span (not made current: attempts name it as their parent).

        ``args_json`` is ``None`` when the arguments are not recorded
        (``capture_arguments="off"``, an unknown tool), ``args_hash`` empty when
        they were never read (an unknown tool); ``service`` is recorded when a retry budget or
        circuit breaker keeps state per service."""
        # copy-then-store: half the cost of a {**base, ...} display.
        attributes = base.copy()
        attributes[attr.OPERATION_NAME] = "execute_tool"
        if args_hash:
            attributes[attr.ARGS_HASH] = args_hash
        if args_json is not None:
            attributes[attr.TOOL_CALL_ARGUMENTS] = args_json
        if schema_version is not None:
            attributes[attr.SCHEMA_VERSION] = schema_version
        if service is not None:
            attributes[attr.SERVICE] = service
        clock = self._clock
        return self._tracer.start_span(
            f"execute_tool {call.name}",
            kind=_INTERNAL,
            attributes=attributes,
            start_time=None if clock is None else clock(),
        )

    def close_call(
        self,
        span: Span,
        result: ToolResult,
        result_hash: str | None,
        http_status: int | None = None,
    ) -> None:
        """Record the final result on the call span and end it."""
        final = _final_attributes(result, result_hash)
        if result.error_code is not None:
            final[attr.ERROR_CODE] = result.error_code
            final[attr.ERROR_TYPE] = result.error_code
        if http_status is not None:
            final[attr.HTTP_STATUS_CODE] = http_status
        if result.retry_after_s is not None:
            final[attr.RETRY_AFTER_S] = result.retry_after_s
        if result.next is not None and result.next.tools:
            final[attr.NEXT_TOOLS] = list(result.next.tools)
        span.set_attributes(final)
        if result.ok:
            span.set_status(_STATUS_OK)
        else:
            span.set_status(StatusCode.ERROR, result.message)
        clock = self._clock
        span.end(end_time=None if clock is None else clock())

    def call_succeeded(self, span: Span, result: ToolResult, result_hash: str) -> None:
        """:meth:`close_call` for a success, the hot path: a success has no error
        code, HTTP status, retry-after or ``next``."""
        span.set_attributes(_final_attributes(result, result_hash))
        span.set_status(_STATUS_OK)
        clock = self._clock
        span.end(end_time=None if clock is None else clock())

    # -- attempt spans --------------------------------------------------------------

    def start_attempt(
        self,
        call_span: Span,
        name: str,
        base: dict[str, Any],
        attempt: int,
        total_wait_s: float,
        probe: bool = False,
    ) -> tuple[Span, Token[Context]]:
        """Open attempt ``attempt`` under the call span and make it current, so
        client spans made inside the tool nest under it; the token detaches it.
        ``probe``: the circuit breaker let this attempt through to test recovery."""
        attributes = base.copy()
        if probe:
            attributes[attr.CIRCUIT_PROBE] = True
        attributes[attr.ATTEMPT] = attempt
        attributes[attr.HTTP_RESEND_COUNT] = attempt - 1
        attributes[attr.RETRY_ELAPSED_WAIT_S] = total_wait_s
        if attempt > 1:
            attributes[attr.RETRY_INITIATOR] = "orchestrator"
        clock = self._clock
        parent = trace.set_span_in_context(call_span)
        span = self._tracer.start_span(
            f"attempt {attempt} {name}",
            context=parent,
            kind=_INTERNAL,
            attributes=attributes,
            start_time=None if clock is None else clock(),
        )
        # Attach directly rather than via use_span: the SDK's helper would also
        # record the raw exception message (secrets and all). ``parent`` is the
        # current context with the call span in the span slot, so putting the
        # attempt span there instead gives the same context without reading
        # the current one again.
        return span, otel_context.attach(trace.set_span_in_context(span, parent))

    # Make the attempt span stop being current (the token of :meth:`start_attempt`):
    # the API's function itself, so the hot path pays no extra frame for it.
    detach = staticmethod(otel_context.detach)

    def attempt_succeeded(self, span: Span) -> None:
        span.set_attributes(_ATTEMPT_OK)
        span.set_status(_STATUS_OK)
        clock = self._clock  # end() inline: this is the hot path
        span.end(end_time=None if clock is None else clock())

    def attempt_invalid_response(self, span: Span) -> None:
        span.set_attributes({attr.ATTEMPT_OUTCOME: "invalid_response", attr.RETRY_DELAY_S: 0.0})
        span.set_status(StatusCode.ERROR, "result failed the result schema")
        self.end(span)

    def attempt_failed(self, span: Span, error: ToolError, message: str, delay_s: float) -> None:
        """A classified failure, and the delay before the next attempt (0 when none)."""
        failure: dict[str, Any] = {
            attr.ATTEMPT_OUTCOME: error.code,
            attr.ERROR_TYPE: error.code,
            attr.RETRY_DELAY_S: delay_s,
        }
        if error.status_code is not None:
            failure[attr.HTTP_STATUS_CODE] = error.status_code
        span.set_attributes(failure)
        span.set_status(StatusCode.ERROR, message)
        self.end(span)

    def crashed(
        self,
        attempt_span: Span,
        call_span: Span,
        kind: str,
        message: str,
        attempts: int,
        total_wait_s: float,
    ) -> None:
        """A programming error: record it on both spans and end them."""
        for span in (attempt_span, call_span):
            span.add_event(
                "exception",
                {"exception.type": kind, "exception.message": message},
                timestamp=self._now(),
            )
            span.set_attribute(attr.ERROR_TYPE, kind)
            span.set_status(StatusCode.ERROR, f"{kind}: {message}")
        attempt_span.set_attribute(attr.ATTEMPT_OUTCOME, kind)
        self.end(attempt_span)
        call_span.set_attributes({attr.ATTEMPTS: attempts, attr.TOTAL_WAIT_S: total_wait_s})
        self.end(call_span)

    # -- retry budget and circuit breaker events --------------------------------------

    def budget_refused(self, call_span: Span, service: str, verdict: Any) -> None:
        """The retry budget refused a retry (``verdict``: the budget's counts)."""
        call_span.set_attribute(attr.RETRY_BUDGET, service)
        call_span.add_event(
            attr.EVENT_BUDGET_REFUSED,
            {
                attr.SERVICE: service,
                "toolspan.retry.budget.retries": verdict.retries,
                "toolspan.retry.budget.first_attempts": verdict.first_attempts,
                "toolspan.retry.budget.limit": verdict.limit,
            },
            timestamp=self._now(),
        )

    def circuit_transition(self, call_span: Span, service: str, before: str, after: str) -> None:
        """The circuit breaker of ``service`` changed state during this call."""
        call_span.add_event(
            attr.EVENT_CIRCUIT_TRANSITION,
            {attr.SERVICE: service, attr.CIRCUIT_FROM: before, attr.CIRCUIT_TO: after},
            timestamp=self._now(),
        )

    # -- the run span ---------------------------------------------------------------

    def start_run(self, name: str, attributes: dict[str, Any]) -> Span:
        """Open a run span (``executor.run``): the parent of the calls inside it."""
        clock = self._clock
        return self._tracer.start_span(
            name,
            kind=_INTERNAL,
            attributes=attributes,
            start_time=None if clock is None else clock(),
        )

    # -- both -----------------------------------------------------------------------

    def _now(self) -> int | None:
        # Events on the span clock too: a span stamped by a fake clock must
        # not carry an event stamped by the wall clock.
        return None if self._clock is None else self._clock()

    def end(self, span: Span) -> None:
        clock = self._clock
        span.end(end_time=None if clock is None else clock())
