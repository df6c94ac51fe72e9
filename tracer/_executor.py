"""The retry boundary: executes tool calls, retries what is safe, traces it all.

:class:`_Core` decides; :class:`Executor` (sync) and :class:`AsyncExecutor`
only do. As tenacity's ``iter()`` does, every step of the core returns the
next *action*, and each executor is a short loop that performs it:

* :data:`INVOKE`: call ``run.fn(**run.arguments)`` (the tool, or its
  read-back) and report what it returned (:meth:`_Core.returned`) or raised
  (:meth:`_Core.raised`);
* :class:`Sleep`: wait ``delay_s`` before the next attempt, then report
  (:meth:`_Core.slept`);
* a :class:`ToolResult`: the call is over; this is its answer. It is the one
  "stop here" signal of every step.

The per-call sequence (admit -> read back -> spend budget -> attempt ->
classify -> retry or finish) lives in the core only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import hashlib
import inspect
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Generic, TypeVar

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from . import _attributes as attr
from ._adapters import to_tool_error
from ._batch import plan_lanes
from ._breaker import CircuitBreaker, Transition
from ._budget import RetryBudget
from ._canonical import canonical_json, fingerprint
from ._errors import ConfigurationError, ToolError
from ._hooks import AttemptEvent, CallEvent, Hook
from ._next import next_step
from ._policy import AMBIGUOUS_CODES, Decision, RetryPolicy
from ._redact import Redactor
from ._result import Status as ResultStatus
from ._result import ToolResult, build_result
from ._safeguards import Safeguards
from ._tool import Tool, ToolCall
from ._version import __version__
from .store import StoreError
from .store._fleet import Admission

__all__ = ["AsyncExecutor", "Executor", "current_call"]

_log = logging.getLogger("toolspan.tracer")

DEFAULT_MAX_RESULT_BYTES = 16 * 1024
_CURRENT_CALL: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "toolspan_current_call", default=None
)


class _LeaseKeeper:
    """Renews a claimed key's lease while one slow attempt runs.

    Without it an attempt longer than the lease would let another worker
    take the key over and run the write a second time.
    """

    def __init__(self, guards: Safeguards, key: str, token: str) -> None:
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._renew, args=(guards, key, token), name="toolspan-lease", daemon=True
        )
        self._thread.start()

    def _renew(self, guards: Safeguards, key: str, token: str) -> None:
        while not self._stopped.wait(guards.lease_s / 3):
            try:
                if not guards.renew(key, token):
                    return  # taken over: nothing left to keep
            except StoreError:
                _log.warning("could not renew the lease of an idempotency key")

    def stop(self) -> None:
        self._stopped.set()


_ATTEMPT_OK: dict[str, Any] = {attr.ATTEMPT_OUTCOME: "ok", attr.RETRY_DELAY_S: 0.0}
# Statuses are immutable: one instance serves every successful span.
_STATUS_OK = Status(StatusCode.OK)


def current_call() -> ToolCall | None:
    """The tool call being executed, inside a tool function (else ``None``).

    Tools use it to forward the idempotency key to their service, e.g. as
    an ``Idempotency-Key`` header.
    """
    return _CURRENT_CALL.get()


_NOT_ANSWERS: frozenset[str] = frozenset(
    {
        "loop_blocked",
        "in_progress",
        "store_unavailable",
        "turn_budget",
        "read_back_required",
        "circuit_open",
    }
)

# Sentinels for the read-back answer: not asked, or asked and failed.
_SKIPPED = object()
_UNKNOWN = object()
# What an INVOKE asks for, so the core knows which step the answer feeds.
_ATTEMPT, _READ_BACK_FIRST, _READ_BACK_AFTER_FAILURE = 0, 1, 2
_RETRYABLE_STOPS: frozenset[str] = frozenset(
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
# A retry the budget refused: the attempt span records no scheduled delay.
_NOT_RETRIED = Decision(retry=False)


class Invoke:
    """The action "call ``run.fn(**run.arguments)`` and report back".

    One instance, :data:`INVOKE`, serves every call: what to invoke is on the
    run, so asking costs no allocation on the hot path.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "INVOKE"


INVOKE: Final = Invoke()


class Sleep:
    """The action "wait ``delay_s`` seconds, then report back" (before a retry)."""

    __slots__ = ("delay_s",)

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __repr__(self) -> str:
        return f"Sleep({self.delay_s!r})"


# What each step of the core returns: the next thing for the driver to do.
Action = Invoke | Sleep | ToolResult


class _Run:
    """The state of one logical call while it executes (built on every call,
    so a plain slotted class: cheaper to construct than a dataclass)."""

    __slots__ = (
        "admission",
        "args_hash",
        "arguments",
        "asking",
        "attempt",
        "attempt_span",
        "base_attributes",
        "call",
        "call_identity",
        "call_token",
        "claim_token",
        "context_token",
        "error",
        "fn",
        "keeper",
        "policy",
        "safe_to_repeat",
        "span",
        "started_at",
        "tool",
        "total_wait_s",
    )

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.attempt = 0
        self.total_wait_s = 0.0
        # Set by the safeguards: the call's identity for loop and retry
        # tracking ("tool:args_hash"), and the idempotency claim this run holds.
        self.call_identity = ""
        self.claim_token: str | None = None
        # The last classified failure (read-backs and the final result need it).
        self.error: ToolError | None = None
        # What the pending INVOKE calls, and which step its answer feeds.
        self.fn: Callable[..., Any] = _never_called
        self.asking = _ATTEMPT
        # While an attempt runs: what ``_leave`` undoes.
        self.context_token: Any = None
        self.call_token: Any = None
        self.keeper: _LeaseKeeper | None = None
        # The circuit breaker's admission of the attempt in flight, until reported.
        self.admission: Admission | None = None

    # Set by ``_Core.begin`` once the call is valid.
    tool: Tool
    arguments: dict[str, Any]
    args_hash: str
    span: Span
    attempt_span: Span
    started_at: float
    policy: RetryPolicy
    base_attributes: dict[str, Any]
    safe_to_repeat: bool


def _never_called(**arguments: Any) -> Any:
    raise AssertionError("the core asked to invoke nothing")


class _Core:
    """Every decision of the sync and async executors; performs no waiting.

    The drivers call :meth:`open` and :meth:`begin`, then feed each action's
    outcome back through :meth:`returned`, :meth:`raised` or :meth:`slept`;
    each of those returns the next action.
    """

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        policy: RetryPolicy | None,
        tracer_provider: TracerProvider | None,
        redactor: Redactor | None,
        hash_key: bytes | str | None,
        max_result_bytes: int,
        clock: Callable[[], float],
        rng: random.Random | None,
        hooks: Sequence[Hook],
        span_clock: Callable[[], int] | None = None,
        safeguards: Safeguards | None = None,
        retry_budget: RetryBudget | None = None,
        circuit_breaker: CircuitBreaker | None = None,
    ) -> None:
        self.span_clock = span_clock
        self.safeguards = safeguards
        if retry_budget is not None and not isinstance(retry_budget, RetryBudget):
            raise ConfigurationError("retry_budget must be a RetryBudget")
        if circuit_breaker is not None and not isinstance(circuit_breaker, CircuitBreaker):
            raise ConfigurationError("circuit_breaker must be a CircuitBreaker")
        self.retry_budget = retry_budget
        self.circuit_breaker = circuit_breaker
        self._per_service = retry_budget is not None or circuit_breaker is not None
        self.tools: dict[str, Tool] = {}
        for declared in tools:
            if declared.name in self.tools:
                raise ConfigurationError(f"tool {declared.name!r} is declared twice")
            self.tools[declared.name] = declared
        self.policy = policy or RetryPolicy()
        # Per-tool policies are built once, not per call.
        self._policies = {
            name: self.policy.with_codes(declared.retryable_codes)
            for name, declared in self.tools.items()
            if declared.retryable_codes is not None
        }
        self.tracer: Tracer = trace.get_tracer(
            attr.SCOPE_NAME, __version__, tracer_provider=tracer_provider
        )
        self.redactor = redactor or Redactor()
        self.hash_key = hash_key.encode() if isinstance(hash_key, str) else hash_key
        if max_result_bytes < 64:
            raise ConfigurationError("max_result_bytes must be at least 64")
        self.max_result_bytes = max_result_bytes
        self.clock = clock
        # A live process gets an unseeded generator; tests inject a seeded one.
        self.rng = rng or random.Random()
        self.hooks = tuple(hooks)
        # The read tools that answer "did that write happen?" for some write.
        self.check_tools = frozenset(t.check_with for t in self.tools.values() if t.check_with)

    def _start_span(
        self,
        name: str,
        *,
        attributes: dict[str, Any],
        kind: SpanKind = SpanKind.INTERNAL,
        context: Any = None,
    ) -> Span:
        if self.span_clock is None:
            return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes)
        return self.tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=self.span_clock()
        )

    def _end(self, span: Span) -> None:
        if self.span_clock is None:
            span.end()
        else:
            span.end(end_time=self.span_clock())

    # -- the driver's entry points: each returns the next action -------------------

    @staticmethod
    def open(call: ToolCall) -> _Run:
        """The state of ``call``'s run; :meth:`begin` decides its first action."""
        return _Run(call)

    def begin(self, run: _Run) -> Action:
        """Validate the call and open its span, then admit it."""
        call = run.call
        declared = self.tools.get(call.name)
        if declared is None:
            return self._refuse(call, None, "unknown_tool", f"no tool named {call.name!r}")
        arguments, problem = self._parse_arguments(call, declared)
        args_bytes = canonical_json(self.redactor.value(arguments))
        if self.hash_key is None:
            args_hash = hashlib.sha256(args_bytes).digest().hex()  # faster than hexdigest()
        else:
            raw_bytes = canonical_json(arguments) if self.hash_key else args_bytes
            args_hash = fingerprint(raw_bytes, self.hash_key)
        base = self._base_attributes(call, declared)
        # copy-then-store: half the cost of a {**base, ...} display.
        call_attributes = base.copy()
        call_attributes[attr.OPERATION_NAME] = "execute_tool"
        call_attributes[attr.TOOL_CALL_ARGUMENTS] = args_bytes.decode()
        call_attributes[attr.ARGS_HASH] = args_hash
        if declared.schema_version is not None:
            call_attributes[attr.SCHEMA_VERSION] = declared.schema_version
        if self._per_service:
            call_attributes[attr.SERVICE] = declared.service
        if problem is not None:
            return self._refuse(call, declared, "invalid_arguments", problem, call_attributes)
        span_clock = self.span_clock
        run.span = self.tracer.start_span(
            f"execute_tool {call.name}",
            kind=SpanKind.INTERNAL,
            attributes=call_attributes,
            start_time=None if span_clock is None else span_clock(),
        )
        run.tool = declared
        run.arguments = arguments
        run.args_hash = args_hash
        run.started_at = self.clock()
        run.policy = self._policies.get(call.name, self.policy)
        run.base_attributes = base
        run.safe_to_repeat = declared.side_effect != "write" or (
            declared.idempotent and bool(call.idempotency_key)
        )
        if self.safeguards is None:
            return self._start_attempt(run)
        return self._admit(self.safeguards, run)

    def returned(self, run: _Run, value: Any) -> Action:
        """What the pending INVOKE returned."""
        if run.asking == _ATTEMPT:
            self._leave(run)
            if run.admission is not None:
                self._report(run, failed=False)
            return self._succeeded(run, value)
        return self._read_back_answered(run, value)

    def raised(self, run: _Run, exc: Exception) -> Action:
        """What the pending INVOKE raised; re-raises a programming error."""
        if run.asking != _ATTEMPT:
            # A failed read-back leaves the effect unknown.
            _log.warning(
                "read-back of %s failed (%s); its outcome stays unknown",
                run.call.name,
                type(exc).__name__,
            )
            return self._read_back_answered(run, _UNKNOWN)
        self._leave(run)
        error = to_tool_error(exc)
        if error is None:
            self._crashed(run, exc)
            raise exc  # a programming error propagates, after both spans recorded it
        run.error = error
        if run.admission is not None:
            self._report(run, failed=error.code in run.policy.retryable_codes)
        if (
            not run.safe_to_repeat
            and run.tool.read_back is not None
            and error.code in AMBIGUOUS_CODES
        ):
            # An ambiguous write failure the tool can settle by reading back.
            return self._ask(run, run.tool.read_back, _READ_BACK_AFTER_FAILURE)
        return self._classify(run, error, _SKIPPED)

    def slept(self, run: _Run, delay_s: float) -> Action:
        """The driver waited ``delay_s`` as a :class:`Sleep` asked."""
        run.total_wait_s = round(run.total_wait_s + delay_s, 2)
        if self.safeguards is None:
            return self._start_attempt(run)
        return self._spend_attempt(self.safeguards, run)

    # -- validation ------------------------------------------------------------------

    def _parse_arguments(self, call: ToolCall, declared: Tool) -> tuple[dict[str, Any], str | None]:
        """The arguments as a dict, and what is wrong with them (``None`` if nothing)."""
        raw = call.arguments
        if type(raw) is dict:
            arguments = raw.copy()  # the common case, without the ABC checks below
        else:
            arguments, problem = self._arguments_as_dict(raw)
            if problem is not None:
                return arguments, problem
        check = declared._check_args
        if check is not None:
            try:
                check(arguments)
            except Exception:
                return arguments, _explain_schema_errors(declared.parameters or {}, arguments)
        return arguments, None

    @staticmethod
    def _arguments_as_dict(raw: Any) -> tuple[dict[str, Any], str | None]:
        if isinstance(raw, str | bytes):
            try:
                raw = orjson.loads(raw or "{}")
            except orjson.JSONDecodeError as exc:
                # Position only: the text itself may hold secrets.
                return {}, f"arguments are not valid JSON (at character {exc.pos})"
        if not isinstance(raw, Mapping):
            return {}, f"arguments must be a JSON object, not {type(raw).__name__}"
        return dict(raw), None

    def _base_attributes(self, call: ToolCall, declared: Tool | None) -> dict[str, Any]:
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
        if declared is not None and declared.span_attributes:
            # An adapter's protocol attributes (MCP's); they never replace ours.
            base = {**declared.span_attributes, **base}
        return base

    def _refuse(
        self,
        call: ToolCall,
        declared: Tool | None,
        status: ResultStatus,
        message: str,
        attributes: dict[str, Any] | None = None,
    ) -> ToolResult:
        """A call span for a call that never ran, and its result."""
        if attributes is None:
            attributes = {
                **self._base_attributes(call, declared),
                attr.OPERATION_NAME: "execute_tool",
            }
        span = self._start_span(
            f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        result = ToolResult(
            ok=False,
            status=status,
            tool=call.name,
            call_id=call.call_id,
            error_code=status,
            message=self.redactor.text(message),
            next=next_step(declared, status, status),
        )
        self._close_call_span(span, result, None)
        return result

    # -- around each attempt ------------------------------------------------------

    def _ask(self, run: _Run, fn: Callable[..., Any], asking: int) -> Invoke:
        run.fn = fn
        run.asking = asking
        return INVOKE

    def _start_attempt(self, run: _Run) -> Action:
        """Open the next attempt's span and make it current (so client spans
        nest under it), expose the call to the tool, and keep a claimed key's
        lease alive; :meth:`_leave` undoes all but the span. The circuit
        breaker, when there is one, may refuse the attempt first."""
        if self.circuit_breaker is not None:
            refused = self._pass_breaker(self.circuit_breaker, run)
            if refused is not None:
                return refused
        budget = self.retry_budget
        # A first attempt: counted by the budget, never refused by it.
        if (
            run.attempt == 0
            and budget is not None
            and budget.record_first_attempt(run.tool.service) is None
        ):
            run.span.set_attribute(attr.RETRY_BUDGET_FAILED_OPEN, True)
        run.attempt = attempt = run.attempt + 1
        attributes = run.base_attributes.copy()
        if run.admission is not None and run.admission.probe is not None:
            attributes[attr.CIRCUIT_PROBE] = True
        attributes[attr.ATTEMPT] = attempt
        attributes[attr.HTTP_RESEND_COUNT] = attempt - 1
        attributes[attr.RETRY_ELAPSED_WAIT_S] = run.total_wait_s
        if attempt > 1:
            attributes[attr.RETRY_INITIATOR] = "orchestrator"
        span_clock = self.span_clock
        run.attempt_span = span = self.tracer.start_span(
            f"attempt {attempt} {run.call.name}",
            context=trace.set_span_in_context(run.span),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=None if span_clock is None else span_clock(),
        )
        # Attach directly rather than via use_span: the SDK's helper would also
        # record the raw exception message (secrets and all).
        run.context_token = otel_context.attach(trace.set_span_in_context(span))
        run.call_token = _CURRENT_CALL.set(run.call)
        if run.claim_token is not None and self.safeguards is not None:
            assert run.call.idempotency_key is not None
            run.keeper = _LeaseKeeper(self.safeguards, run.call.idempotency_key, run.claim_token)
        run.fn = run.tool.fn
        run.asking = _ATTEMPT
        return INVOKE

    @staticmethod
    def _leave(run: _Run) -> None:
        if run.keeper is not None:
            run.keeper.stop()
            run.keeper = None
        _CURRENT_CALL.reset(run.call_token)
        otel_context.detach(run.context_token)

    def _succeeded(self, run: _Run, data: Any) -> ToolResult:
        """Check and package a returned value; closes the attempt span."""
        attempt_span = run.attempt_span
        check = run.tool._check_result
        if check is not None:
            try:
                check(data)
            except Exception:
                attempt_span.set_attribute(attr.ATTEMPT_OUTCOME, "invalid_response")
                attempt_span.set_attribute(attr.RETRY_DELAY_S, 0.0)
                attempt_span.set_status(StatusCode.ERROR, "result failed the result schema")
                self._end(attempt_span)
                self._emit_attempt(run, "invalid_response", 0.0)
                detail = _explain_schema_errors(run.tool.result_schema or {}, data)
                return self._finish(
                    run, status="invalid_response", error_code="invalid_response", message=detail
                )
        attempt_span.set_attributes(_ATTEMPT_OK)
        attempt_span.set_status(_STATUS_OK)
        if self.span_clock is None:
            attempt_span.end()
        else:
            self._end(attempt_span)
        if self.hooks:
            self._emit_attempt(run, "ok", 0.0)
        return self._finish(run, status="succeeded", data=data)

    def _read_back_answered(self, run: _Run, answer: Any) -> Action:
        if run.asking == _READ_BACK_FIRST:
            return self._reconcile(run, answer)
        assert run.error is not None
        return self._classify(run, run.error, answer)

    def _classify(self, run: _Run, error: ToolError, read_back: Any) -> Sleep | ToolResult:
        """After a failed attempt: a final result, or a sleep before the retry.

        ``read_back`` is the tool's read-back answer after an ambiguous write
        failure (``_SKIPPED`` when none was made, ``_UNKNOWN`` when it failed).
        """
        attempt_span = run.attempt_span
        if read_back is not _SKIPPED:
            verdict = (
                "failed" if read_back is _UNKNOWN else ("absent" if read_back is None else "found")
            )
            attempt_span.set_attribute(attr.READ_BACK, verdict)
            run.span.set_attribute(attr.READ_BACK, verdict)
            if verdict == "found":
                self._record_failure(run, attempt_span, error, 0.0)
                return self._finish(run, status="succeeded", data=read_back, reconciled=True)
            # The effect is absent: running the write once more is safe.
            run.safe_to_repeat = verdict == "absent"
        decision = run.policy.decide(
            error,
            attempt=run.attempt,
            total_wait_s=run.total_wait_s,
            safe_to_repeat=run.safe_to_repeat,
            rng=self.rng,
            elapsed_s=self.clock() - run.started_at,
        )
        refused = False
        if decision.retry and self.retry_budget is not None:
            refused = self._budget_refuses(self.retry_budget, run)
            if refused:
                decision = _NOT_RETRIED
        self._record_failure(run, attempt_span, error, decision.delay_s)
        # An unprotected write that failed ambiguously, with no read-back to say
        # the effect is absent: it may or may not have happened.
        effect_unknown = (
            run.tool.is_write and error.code in AMBIGUOUS_CODES and not run.safe_to_repeat
        )
        if run.tool.is_write and not (run.tool.idempotent and run.call.idempotency_key):
            run.safe_to_repeat = False  # a read-back's "absent" covers one repeat only
        if refused:
            budget = self.retry_budget
            assert budget is not None
            return self._finish(
                run,
                status="retry_budget",
                error_code=error.code,
                message=f"the retry budget of service {run.tool.service!r} allows no more "
                f"retries in this {budget.window_s:g}s window; not retried: "
                + self.redactor.text(error.message),
                http_status=error.status_code,
            )
        if not decision.retry:
            return self._stopped(run, error, decision, effect_unknown=effect_unknown)
        return Sleep(decision.delay_s)

    # -- retry budget and circuit breaker (per downstream service) ----------------

    def _budget_refuses(self, budget: RetryBudget, run: _Run) -> bool:
        """Ask the budget for one retry; True when it refuses (checked before sleeping)."""
        service = run.tool.service
        verdict = budget.allow_retry(service)
        if verdict.failed_open:
            run.span.set_attribute(attr.RETRY_BUDGET_FAILED_OPEN, True)
            return False
        if verdict.allowed:
            return False
        run.span.set_attribute(attr.RETRY_BUDGET, service)
        run.span.add_event(
            attr.EVENT_BUDGET_REFUSED,
            {
                attr.SERVICE: service,
                "toolspan.retry.budget.retries": verdict.retries,
                "toolspan.retry.budget.first_attempts": verdict.first_attempts,
                "toolspan.retry.budget.limit": verdict.limit,
            },
        )
        return True

    def _pass_breaker(self, breaker: CircuitBreaker, run: _Run) -> ToolResult | None:
        """Admit the next attempt through the breaker, or end the call ``circuit_open``."""
        service = run.tool.service
        admission, transition = breaker.admit(service)
        if transition is not None:
            self._transitioned(run, transition)
        state = "unknown" if admission.failed_open else admission.state
        run.span.set_attribute(attr.CIRCUIT_STATE, state)
        if admission.allowed:
            run.admission = admission
            return None
        # Nothing runs; after failed attempts the last error code is kept.
        error = run.error
        return self._finish(
            run,
            status="circuit_open",
            error_code="circuit_open" if error is None else error.code,
            message=f"the circuit breaker of service {service!r} is {state.replace('_', '-')}: "
            "calls fail fast while it recovers; nothing was executed"
            + ("" if error is None else " after the last failure"),
            http_status=None if error is None else error.status_code,
        )

    def _report(self, run: _Run, *, failed: bool) -> None:
        """Tell the breaker how the admitted attempt ended (``failed``: retryable)."""
        breaker, admission = self.circuit_breaker, run.admission
        assert breaker is not None and admission is not None
        run.admission = None
        transition = breaker.record(run.tool.service, admission, failed=failed)
        if transition is not None:
            self._transitioned(run, transition)

    @staticmethod
    def _transitioned(run: _Run, transition: Transition) -> None:
        run.span.add_event(
            attr.EVENT_CIRCUIT_TRANSITION,
            {
                attr.SERVICE: transition.service,
                attr.CIRCUIT_FROM: transition.before,
                attr.CIRCUIT_TO: transition.after,
            },
        )

    def _record_failure(
        self, run: _Run, attempt_span: Span, error: ToolError, delay_s: float
    ) -> None:
        message = self.redactor.text(error.message)
        failure: dict[str, Any] = {
            attr.ATTEMPT_OUTCOME: error.code,
            attr.ERROR_TYPE: error.code,
            attr.RETRY_DELAY_S: delay_s,
        }
        if error.status_code is not None:
            failure[attr.HTTP_STATUS_CODE] = error.status_code
        attempt_span.set_attributes(failure)
        attempt_span.set_status(StatusCode.ERROR, message)
        self._end(attempt_span)
        self._emit_attempt(run, error.code, delay_s)

    def _stopped(
        self, run: _Run, error: ToolError, decision: Decision, *, effect_unknown: bool
    ) -> ToolResult:
        status: ResultStatus = decision.status or "permanent_error"
        code = error.code
        if effect_unknown:
            # The write may or may not have happened: say so, never guess. This
            # holds for a non-retryable code too (a dropped connection).
            status, code = "unsafe_retry", "unknown_outcome"
        return self._finish(
            run,
            status=status,
            error_code=code,
            message=self._stop_message(status, error),
            retry_after_s=decision.retry_after_s,
            http_status=error.status_code,
        )

    def _stop_message(self, status: str, error: ToolError) -> str:
        detail = self.redactor.text(error.message)
        reasons = {
            "permanent_error": "failed with a permanent error",
            "unsafe_retry": "failed and repeating it is not safe (a write without an "
            "idempotency key); its effect is unknown",
            "attempt_limit": "failed on every allowed attempt",
            "wait_budget": "the next retry would exceed the wait budget",
            "deadline_exceeded": "the next retry would pass the call's deadline",
        }
        return f"{reasons.get(status, status)}: {detail}"

    def _crashed(self, run: _Run, exc: BaseException) -> None:
        """A programming error: record it on both spans (the driver re-raises it)."""
        if run.admission is not None and self.circuit_breaker is not None:
            # Not the service's fault: free a probe slot, count nothing.
            self.circuit_breaker.release(run.tool.service, run.admission)
            run.admission = None
        attempt_span = run.attempt_span
        kind = type(exc).__qualname__
        message = self.redactor.text(str(exc))
        for span in (attempt_span, run.span):
            span.add_event(
                "exception",
                {"exception.type": kind, "exception.message": message},
            )
            span.set_attribute(attr.ERROR_TYPE, kind)
            span.set_status(StatusCode.ERROR, f"{kind}: {message}")
        attempt_span.set_attribute(attr.ATTEMPT_OUTCOME, kind)
        self._end(attempt_span)
        run.span.set_attribute(attr.ATTEMPTS, run.attempt)
        run.span.set_attribute(attr.TOTAL_WAIT_S, run.total_wait_s)
        self._end(run.span)
        if self.safeguards is not None and run.claim_token and run.call.idempotency_key:
            try:  # the write may have happened before the crash: read back next time
                self.safeguards.mark_unknown(run.call.idempotency_key, run.call.call_id)
                self.safeguards.release(run.call.idempotency_key, run.claim_token)
            except StoreError:
                _log.warning("could not release idempotency key after a crash")

    # -- after the last attempt ---------------------------------------------------

    def _finish(
        self,
        run: _Run,
        *,
        status: ResultStatus,
        data: Any = None,
        error_code: str | None = None,
        message: str = "",
        retry_after_s: float | None = None,
        http_status: int | None = None,
        reconciled: bool = False,
        replayed: bool = False,
        remember: bool = True,
    ) -> ToolResult:
        ok = status == "succeeded"
        truncated = False
        result_hash = None
        encoded = b""
        if ok:
            encoded = canonical_json(data)
            result_hash = hashlib.sha256(encoded).digest().hex()
            if len(encoded) > self.max_result_bytes:
                data, truncated = _truncate(encoded, self.max_result_bytes), True
                message = f"result truncated from {len(encoded)} to {self.max_result_bytes} bytes"
        result = build_result(
            ok,
            status,
            run.call.name,
            run.call.call_id,
            error_code,
            status in _RETRYABLE_STOPS,
            data if ok else None,
            message or ("ok" if ok else status),
            run.attempt,
            run.total_wait_s,
            retry_after_s,
            truncated,
            replayed,
            reconciled,
        )
        if not ok:
            # Failures only: the success path stays as cheap as it was.
            step = next_step(run.tool, status, error_code, retry_after_s)
            if step is not None:
                result = dataclasses.replace(result, next=step)
        if remember and self.safeguards is not None:
            self._remember(self.safeguards, run, result, result_hash, encoded)
        self._close_call_span(run.span, result, result_hash, http_status)
        return result

    # -- safeguards (idempotency store, turn budget, loop guard) ----------------

    def _admit(self, guards: Safeguards, run: _Run) -> Action:
        """Consult the store before anything runs."""
        call = run.call
        run.call_identity = f"{call.name}:{run.args_hash}"
        try:
            repeated = guards.repeated_failure(call.conversation_id, run.call_identity)
            if repeated is not None and repeated != call.call_id:
                run.span.set_attributes({attr.RETRY_INITIATOR: "model", attr.RETRY_OF: repeated})
            if guards.is_loop(call.conversation_id, run.call_identity):
                return self._finish(
                    run,
                    status="loop_blocked",
                    error_code="loop_blocked",
                    message="this exact call already got the same answer "
                    f"{guards.loop_threshold} times in this conversation; change the "
                    "arguments or stop",
                )
            if call.idempotency_key and run.tool.is_write:
                return self._claim(guards, run, call.idempotency_key)
            if run.tool.is_write and not call.idempotency_key:
                checked = guards.check_state(call.conversation_id, run.call_identity)
                if checked == "waiting":
                    return self._check_first(run)
                if checked == "checked":  # the model asked the check tool first
                    run.span.set_attribute(attr.READ_BACK, "checked")
        except StoreError as exc:
            return self._store_failed(run, exc)
        return self._spend_attempt(guards, run)

    def _claim(self, guards: Safeguards, run: _Run, key: str) -> Action:
        store_fingerprint = fingerprint(canonical_json(run.arguments), self.hash_key)
        claim = guards.claim(key, store_fingerprint)
        if claim.outcome == "replay":
            data = orjson.loads(claim.result or b"null")
            return self._finish(run, status="succeeded", data=data, replayed=True)
        if claim.outcome == "conflict":
            return self._finish(
                run,
                status="idempotency_conflict",
                error_code="idempotency_conflict",
                message="this idempotency key was already used with different arguments",
            )
        if claim.outcome == "in_progress":
            return self._finish(
                run,
                status="in_progress",
                error_code="in_progress",
                message="another call with this idempotency key is running; try again later",
            )
        run.claim_token = claim.token
        if claim.outcome == "takeover":
            run.span.set_attribute(attr.IDEMPOTENCY_TAKEOVER, True)
        lost = claim.store_lost and guards.detect_store_loss
        if lost:
            run.span.set_attribute(attr.STORE_LOST, True)
            if run.tool.read_back is None and not run.tool.idempotent:
                return self._finish(
                    run,
                    status="store_unavailable",
                    error_code="store_unavailable",
                    message="the idempotency store lost data recently (a restart, a flush or "
                    "a replaced store), so this action may already have completed; the tool "
                    "declares no read-back: nothing was executed",
                )
        if claim.outcome != "takeover" and not lost and not guards.outcome_unknown(key):
            return self._spend_attempt(guards, run)
        # An earlier run of this key ended without knowing its effect.
        run.span.set_attribute(attr.READ_BACK, "required")
        if run.tool.read_back is None:
            return self._reconcile(run, _SKIPPED)
        return self._ask(run, run.tool.read_back, _READ_BACK_FIRST)

    def _check_first(self, run: _Run) -> Action:
        """A repeat of an unkeyed write whose last outcome is unknown: check before it runs."""
        run.span.set_attribute(attr.READ_BACK, "required")
        if run.tool.read_back is not None:
            return self._ask(run, run.tool.read_back, _READ_BACK_FIRST)
        check = run.tool.check_with
        how = f"call {check} first" if check else "no check tool is declared for it"
        return self._finish(
            run,
            status="read_back_required",
            error_code="read_back_required",
            message="an earlier run of this exact write in this conversation ended with an "
            f"unknown outcome; it may have happened: {how}",
        )

    def _reconcile(self, run: _Run, answer: Any) -> Action:
        """Before executing a key whose earlier effect is unknown: the read-back says."""
        if answer is _SKIPPED:
            if run.tool.idempotent:
                # The service honours the key: executing again is safe.
                return self._spend_attempt(self._guards(), run)
            return self._finish(
                run,
                status="unsafe_retry",
                error_code="unknown_outcome",
                message="an earlier run of this action ended with an unknown outcome and the "
                "tool declares no read-back",
            )
        verdict = "failed" if answer is _UNKNOWN else ("absent" if answer is None else "found")
        run.span.set_attribute(attr.READ_BACK, verdict)
        if verdict == "found":
            return self._finish(run, status="succeeded", data=answer, reconciled=True)
        if verdict == "failed":
            return self._finish(
                run,
                status="unsafe_retry",
                error_code="unknown_outcome",
                message="the read-back failed, so the earlier run's outcome stays unknown",
            )
        return self._spend_attempt(self._guards(), run)

    def _guards(self) -> Safeguards:
        assert self.safeguards is not None  # only steps of a guarded run call this
        return self.safeguards

    def _spend_attempt(self, guards: Safeguards, run: _Run) -> Action:
        """Spend one attempt of the turn budget, then start the attempt."""
        action = run.call.idempotency_key or run.call_identity
        try:
            if run.claim_token is not None and run.attempt > 0:
                assert run.call.idempotency_key is not None
                if not guards.renew(run.call.idempotency_key, run.claim_token):
                    run.claim_token = None  # another worker took the key over
                    return self._finish(
                        run,
                        status="in_progress",
                        error_code="in_progress",
                        message="another worker took over this idempotency key",
                    )
            within_budget = guards.spend_attempt(run.call.request_id, action)
        except StoreError as exc:
            return self._store_failed(run, exc)
        if within_budget:
            return self._start_attempt(run)
        return self._finish(
            run,
            status="turn_budget",
            error_code="turn_budget",
            message=f"this action used its {guards.max_attempts_per_action} attempts for this "
            "request",
        )

    def _store_failed(self, run: _Run, exc: StoreError) -> Action:
        _log.warning("idempotency store failed: %s", self.redactor.text(str(exc)))
        if not run.tool.is_write:
            # A read is safe to run unguarded: availability over the loop guard.
            run.claim_token = None
            run.call_identity = ""  # and nothing more to record in a store that is down
            return self._start_attempt(run)
        # Fail closed: without the store a write could run twice.
        return self._finish(
            run,
            status="store_unavailable",
            error_code="store_unavailable",
            message="the idempotency store is unavailable; nothing was executed",
            remember=False,  # the store is down: nothing more to record in it
        )

    def _remember(
        self,
        guards: Safeguards,
        run: _Run,
        result: ToolResult,
        result_hash: str | None,
        encoded: bytes,
    ) -> None:
        """Record the result in the store: claim, loop answers, failed calls."""
        call = run.call
        try:
            if run.claim_token is not None and call.idempotency_key:
                self._settle_claim(guards, run, result, encoded, call.idempotency_key)
            # Refusals that never ran the tool are no answer: polling a key in
            # flight elsewhere must not turn into a loop.
            if result.status not in _NOT_ANSWERS and run.call_identity:
                answer = result_hash if result.ok else (result.error_code or result.status)
                guards.record_answer(call.conversation_id, run.call_identity, str(answer))
                guards.remember_outcome(
                    call.conversation_id, run.call_identity, call.call_id, result.ok
                )
            self._remember_checks(guards, run, result)
        except StoreError as exc:
            # The result is decided; losing guard bookkeeping must not change it.
            _log.warning(
                "could not record the outcome in the store: %s", self.redactor.text(str(exc))
            )

    def _remember_checks(self, guards: Safeguards, run: _Run, result: ToolResult) -> None:
        """Unkeyed writes left unknown wait for a check; a check tool's success clears them."""
        call = run.call
        if result.ok and call.name in self.check_tools:
            guards.note_checked(call.conversation_id, call.name)
        if not run.tool.is_write or call.idempotency_key or not run.call_identity:
            return
        if result.error_code == "unknown_outcome":
            guards.await_check(call.conversation_id, run.call_identity, run.tool.check_with)
        elif result.attempts or result.reconciled:  # it ran again, or a read-back settled it
            guards.forget_check(call.conversation_id, run.call_identity)

    def _settle_claim(
        self, guards: Safeguards, run: _Run, result: ToolResult, encoded: bytes, key: str
    ) -> None:
        """Give up the claim: completed with the result, or released."""
        token, run.claim_token = run.claim_token, None
        assert token is not None
        if result.ok and not result.replayed:
            guards.complete(key, token, encoded)
            return
        last_code = run.error.code if run.error is not None else None
        if last_code in AMBIGUOUS_CODES or result.error_code == "unknown_outcome":
            # Never drop a failed write silently: whoever runs this key next reads back.
            guards.mark_unknown(key, run.call.call_id)
        guards.release(key, token)

    def _close_call_span(
        self,
        span: Span,
        result: ToolResult,
        result_hash: str | None,
        http_status: int | None = None,
    ) -> None:
        final: dict[str, Any] = {
            attr.STATUS: result.status,
            attr.RETRYABLE: result.retryable,
            attr.ATTEMPTS: result.attempts,
            attr.TOTAL_WAIT_S: result.total_wait_s,
            attr.IDEMPOTENCY_REPLAYED: result.replayed,
        }
        if result_hash is not None:
            final[attr.RESULT_HASH] = result_hash
        if result.error_code is not None:
            final[attr.ERROR_CODE] = result.error_code
            final[attr.ERROR_TYPE] = result.error_code
        if http_status is not None:
            final[attr.HTTP_STATUS_CODE] = http_status
        if result.retry_after_s is not None:
            final[attr.RETRY_AFTER_S] = result.retry_after_s
        if result.truncated:
            final[attr.RESULT_TRUNCATED] = True
        if result.reconciled:
            final[attr.RECONCILED] = True
        if result.next is not None and result.next.tools:
            final[attr.NEXT_TOOLS] = list(result.next.tools)
        span.set_attributes(final)
        if result.ok:
            span.set_status(_STATUS_OK)
        else:
            span.set_status(StatusCode.ERROR, result.message)
        if self.span_clock is None:
            span.end()
        else:
            self._end(span)
        if self.hooks:
            event = CallEvent(result=result)
            for hook in self.hooks:
                _safely(hook.on_call, event)

    def _emit_attempt(self, run: _Run, outcome: str, delay_s: float) -> None:
        if not self.hooks:
            return
        event = AttemptEvent(
            tool=run.call.name,
            call_id=run.call.call_id,
            attempt=run.attempt,
            outcome=outcome,
            delay_s=delay_s,
            total_wait_s=run.total_wait_s,
        )
        for hook in self.hooks:
            _safely(hook.on_attempt, event)


def _safely(fn: Callable[[Any], None], event: Any) -> None:
    # Telemetry must never break a tool call.
    try:
        fn(event)
    except Exception:
        _log.exception("toolspan hook %r failed; the tool call is unaffected", fn)


def _truncate(encoded: bytes, limit: int) -> str:
    # Cut on a UTF-8 character boundary so the preview stays valid text.
    return encoded[:limit].decode("utf-8", errors="ignore")


def _explain_schema_errors(schema: Mapping[str, Any], instance: Any) -> str:
    """Name every failing field, without echoing values (they may be secrets)."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    problems = []
    for error in sorted(validator.iter_errors(instance), key=lambda err: list(err.path)):
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.path)
        field_name = where.lstrip(".") or "(arguments)"
        problems.append(_describe(field_name, error))
    return "invalid arguments: " + "; ".join(problems[:10]) if problems else "invalid arguments"


def _describe(field_name: str, error: Any) -> str:
    rule, expected = error.validator, error.validator_value
    if rule == "required":
        missing = [name for name in expected if name not in (error.instance or {})]
        return "missing required field(s) " + ", ".join(repr(name) for name in missing)
    if rule == "additionalProperties":
        # Field names only (the model chose them), never their values.
        known = set((error.schema or {}).get("properties") or ())
        extra = [name for name in (error.instance or {}) if name not in known]
        return f"{field_name}: unexpected field(s) " + ", ".join(repr(n) for n in extra[:10])
    if rule in ("type", "enum", "const", "format", "pattern"):
        return f"{field_name}: must match {rule} {expected!r}"
    return f"{field_name}: fails {rule} {expected!r}"


_SleepT = TypeVar("_SleepT")


class _ExecutorBase(Generic[_SleepT]):
    """Construction shared by :class:`Executor` and :class:`AsyncExecutor`.

    ``sleep``, ``clock`` and ``rng`` are injectable; tests pass a fake clock
    (see :mod:`toolspan.tracer.testing`) so nothing sleeps for real.
    ``span_clock`` (Unix nanoseconds) stamps the spans instead of the SDK's
    clock: simulations and replays get timelines that match their fake time.
    ``safeguards`` adds the idempotency store and the turn and loop guards.
    ``retry_budget`` (:class:`RetryBudget`) bounds retries per downstream
    service across the fleet; ``circuit_breaker`` (:class:`CircuitBreaker`)
    fails calls fast while their service is failing.
    """

    _default_sleep: Any

    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        policy: RetryPolicy | None = None,
        tracer_provider: TracerProvider | None = None,
        redactor: Redactor | None = None,
        hash_key: bytes | str | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        sleep: _SleepT | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        hooks: Sequence[Hook] = (),
        span_clock: Callable[[], int] | None = None,
        safeguards: Safeguards | None = None,
        retry_budget: RetryBudget | None = None,
        circuit_breaker: CircuitBreaker | None = None,
    ) -> None:
        self._core = _Core(
            tools,
            policy=policy,
            tracer_provider=tracer_provider,
            redactor=redactor,
            hash_key=hash_key,
            max_result_bytes=max_result_bytes,
            clock=clock,
            rng=rng,
            hooks=hooks,
            span_clock=span_clock,
            safeguards=safeguards,
            retry_budget=retry_budget,
            circuit_breaker=circuit_breaker,
        )
        self._sleep: _SleepT = sleep if sleep is not None else type(self)._default_sleep

    @property
    def tools(self) -> Mapping[str, Tool]:
        """The declared tools by name."""
        return self._core.tools


class Executor(_ExecutorBase[Callable[[float], None]]):
    """Executes tool calls synchronously behind the retry boundary.

    >>> executor = Executor([get_weather])            # doctest: +SKIP
    >>> result = executor.execute(ToolCall.from_openai(tool_call, conversation_id="c1"))
    >>> messages.append(result.to_openai_message())   # doctest: +SKIP

    Options: see :class:`_ExecutorBase` (policy, tracer provider, redactor,
    hash key, result size cap, sleep/clock/rng, hooks, span clock, safeguards).
    """

    _default_sleep = staticmethod(time.sleep)

    def execute(self, call: ToolCall) -> ToolResult:
        """Run ``call`` to a final, structured result."""
        core = self._core
        run = core.open(call)
        action = core.begin(run)
        while not isinstance(action, ToolResult):
            if action is INVOKE:
                try:
                    value = run.fn(**run.arguments)
                except Exception as exc:
                    action = core.raised(run, exc)
                else:
                    action = core.returned(run, value)
            else:
                assert isinstance(action, Sleep)
                self._sleep(action.delay_s)
                action = core.slept(run, action.delay_s)
        return action

    def execute_batch(self, calls: Sequence[ToolCall], *, max_workers: int = 8) -> list[ToolResult]:
        """Run the calls of one model step, in parallel where safe (see ``_batch``).

        Results come back in the model's order. A programming error in any
        call propagates after the other lanes finished.
        """
        lanes = plan_lanes(calls, self._core.tools)
        results: list[ToolResult | None] = [None] * len(calls)

        def run_lane(lane: list[int]) -> None:
            for index in lane:
                results[index] = self.execute(calls[index])

        if len(lanes) <= 1:
            for lane in lanes:
                run_lane(lane)
        else:
            workers = max(1, min(max_workers, len(lanes)))
            with concurrent.futures.ThreadPoolExecutor(workers, "toolspan-batch") as pool:
                # Each lane runs in a copy of this context, so spans keep their parent.
                futures = [
                    pool.submit(contextvars.copy_context().run, run_lane, lane) for lane in lanes
                ]
                for future in futures:
                    future.result()
        return [result for result in results if result is not None]

    def __call__(self, call: ToolCall) -> ToolResult:
        return self.execute(call)


class AsyncExecutor(_ExecutorBase[Callable[[float], Awaitable[None]]]):
    """The :class:`Executor` for asyncio: awaits async tools, sleeps without blocking.

    Sync tool functions are called directly (keep them non-blocking, or wrap
    them with :func:`asyncio.to_thread` yourself).
    """

    _default_sleep = staticmethod(asyncio.sleep)

    async def execute(self, call: ToolCall) -> ToolResult:
        """Run ``call`` to a final, structured result."""
        core = self._core
        run = core.open(call)
        action = core.begin(run)
        while not isinstance(action, ToolResult):
            if isinstance(action, Sleep):
                await self._sleep(action.delay_s)
                action = core.slept(run, action.delay_s)
                continue
            try:
                value = run.fn(**run.arguments)
                if inspect.isawaitable(value):
                    value = await value
            except Exception as exc:
                action = core.raised(run, exc)
            else:
                action = core.returned(run, value)
        return action

    async def execute_batch(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Run the calls of one model step concurrently where safe; model order kept."""
        results: list[ToolResult | None] = [None] * len(calls)

        async def run_lane(lane: list[int]) -> None:
            for index in lane:
                results[index] = await self.execute(calls[index])

        await asyncio.gather(*(run_lane(lane) for lane in plan_lanes(calls, self._core.tools)))
        return [result for result in results if result is not None]

    async def __call__(self, call: ToolCall) -> ToolResult:
        return await self.execute(call)
