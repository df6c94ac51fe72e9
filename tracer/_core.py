"""The executor's core: every decision about one tool call, and no waiting.

As tenacity's ``iter()`` does, each step of :class:`Core` returns the next
*action* for a driver (:class:`~toolspan.tracer.Executor` or
:class:`~toolspan.tracer.AsyncExecutor`) to perform:

* :data:`INVOKE`: call ``run.fn(**run.kwargs)`` (the tool, or its
  read-back) and report what it returned (:meth:`Core.returned`) or raised
  (:meth:`Core.raised`);
* :class:`Sleep`: wait ``delay_s`` before the next attempt, then report
  (:meth:`Core.slept`);
* a :class:`~toolspan.tracer.ToolResult`: the call is over and this is its
  answer. It is the one "stop here" signal of every step.

The sequence of one call (validate -> admit -> reconcile -> spend budget ->
attempt -> classify -> sleep and retry, or finish) lives here only. The parts
it uses live with their owners: spans in ``_spans``, argument and result
checks in ``_tool``, the store protocol in ``_safeguards``, result packaging
in ``_result``, hook dispatch in ``_hooks``.

Words: an *attempt* is one run of the tool; its *outcome* is ``ok`` or the
error code (the contract's ``toolspan.attempt.outcome``). *Classifying* a
failed attempt decides retry or stop; *reconciling* reads a write back when
its effect is unknown; a claim is *settled* (completed or released) in the
store when the call ends.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, Final

import orjson
from opentelemetry.context import Context
from opentelemetry.trace import Span, TracerProvider

from . import _attributes as attr
from ._adapters import to_tool_error
from ._batch import resource_of
from ._breaker import CircuitBreaker, Transition
from ._budget import RetryBudget
from ._canonical import canonical_json, digest
from ._capture import Capture, check_capture, keys_only
from ._current import CURRENT_CALL, current_call
from ._errors import ConfigurationError, ToolError
from ._fleetcheck import check_at_least
from ._hooks import Hook, dispatch_attempt, dispatch_call
from ._next import Next, next_step
from ._policy import AMBIGUOUS_CODES, Decision, RetryPolicy
from ._quarantine import find_quarantine
from ._redact import Redactor
from ._result import RETRYABLE_STATUSES, Status, ToolResult, cap_text, package
from ._run import CURRENT_RUN, AgentRun, new_delivery_id
from ._safeguards import LeaseKeeper, Safeguards
from ._signature import KEY_PARAMETER, takes_key
from ._spans import SpanWriter, base_attributes
from ._throttle import ThrottledWarning, first_time
from ._tool import NOT_PENDING, Tool, ToolCall, check_result, parse_arguments, redacting_acceptor
from .store import StoreError, derive_key
from .store._fleet import Admission
from .store._keys import step_of

__all__ = ["INVOKE", "Action", "Core", "Invoke", "Run", "Sleep", "current_call"]

_log = logging.getLogger("toolspan.tracer")
_sha256 = hashlib.sha256

_CURRENT_CALL = CURRENT_CALL  # the bench's attempt loop sets it as the core does


# -- actions -------------------------------------------------------------------------


class Invoke:
    """The action "call ``run.fn(**run.kwargs)`` and report back".

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


Action = Invoke | Sleep | ToolResult
"""What each step of the core returns: the next thing for the driver to do."""

# The read-back's answer when none was asked for, or when it raised.
_SKIPPED = object()
_UNKNOWN = object()
# What an INVOKE asks for, so the core knows which step the answer feeds.
_ATTEMPT, _READ_BACK_FIRST, _READ_BACK_AFTER_FAILURE = 0, 1, 2

# Arguments orjson cannot encode (it stops at 64-bit integers and 254 levels).
_UNENCODABLE = (
    "invalid arguments: not representable as JSON here "
    "(an integer past 64 bits, or nesting deeper than 254 levels)"
)
# A retry the budget refused: the attempt span records no scheduled delay.
_NOT_RETRIED = Decision(retry=False)

_STOP_REASONS = {
    "permanent_error": "failed with a permanent error",
    "unsafe_retry": "failed and repeating it is not safe (a write without an "
    "idempotency key); its effect is unknown",
    "attempt_limit": "failed on every allowed attempt",
    "wait_budget": "the next retry would exceed the wait budget",
    "deadline_exceeded": "the next retry would pass the call's deadline",
}


class Run:
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
        "binds",
        "call",
        "call_identity",
        "call_token",
        "claim_token",
        "context_token",
        "delivery",
        "ended_at",
        "error",
        "fn",
        "hold_until",
        "keeper",
        "kwargs",
        "pending_since",
        "plan",
        "safe_to_repeat",
        "span",
        "started_at",
        "tool",
        "tool_kwargs",
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
        # False when the claim's arguments may not be the key's (the store lost its
        # record): its outcome is then not kept under them (see ``Core._claim``).
        self.binds = True
        # The last classified failure (the read-back and the claim need it).
        self.error: ToolError | None = None
        # While an attempt runs: what ``Core._leave`` undoes.
        self.keeper: LeaseKeeper | None = None
        # The circuit breaker's admission of the attempt in flight, until reported.
        self.admission: Admission | None = None
        # Absence proves nothing while a request may still commit: when the last
        # attempt failed, since when the store may have forgotten the key (it lost
        # data), and until when the claim is held when the call ends.
        self.ended_at: float | None = None
        self.pending_since: float | None = None
        self.hold_until: float | None = None

    # Set by ``Core.begin``: the delivery of its request the call belongs to (see ``_run``).
    delivery: str
    # Set by ``Core.begin`` once the call is valid, and by each INVOKE.
    tool: Tool
    arguments: dict[str, Any]
    args_hash: str
    span: Span
    started_at: float
    plan: _Plan
    base_attributes: dict[str, Any]
    safe_to_repeat: bool
    fn: Callable[..., Any]
    # What the pending INVOKE passes to ``fn``: the arguments, with the call's
    # key where the function declares an ``idempotency_key`` parameter.
    kwargs: dict[str, Any]
    tool_kwargs: dict[str, Any]
    asking: int
    attempt_span: Span
    context_token: contextvars.Token[Context]
    call_token: contextvars.Token[ToolCall | None]


class _Plan:
    """What every call of one tool shares, decided once when the executor is built,
    so that a call looks its tool up once and finds each answer ready."""

    __slots__ = (
        "always_safe",
        "keyed_safe",
        "keys_resources",
        "lease_s",
        "policy",
        "quick_arguments",
        "read_back_takes_key",
        "schema_version",
        "service",
        "takes_key",
        "tool",
    )

    def __init__(self, declared: Tool, core: Core) -> None:
        self.tool = declared
        # Per-tool retryable codes make a policy of their own.
        codes = declared.retryable_codes
        self.policy = core.policy if codes is None else core.policy.with_codes(codes)
        self.schema_version = declared.schema_version
        # Recorded on the call span when a budget or breaker keeps state per service.
        self.service = declared.service if core._per_service else None
        self.keys_resources = declared.resource_key is not None
        # Reads are always safe to repeat; an idempotent write when its call has a key.
        self.always_safe = declared.side_effect != "write"
        self.keyed_safe = declared.idempotent
        # The claim's lease outlasts the service's commit window (keys honoured: none),
        # and a request in flight with it when the tool declares how long one can be.
        guards = core.safeguards
        if guards is None:
            self.lease_s = 0.0
        elif declared.idempotent:
            self.lease_s = guards.lease_for(0.0)
        else:
            self.lease_s = guards.lease_for(declared.commit_window_s, declared.attempt_timeout_s)
        # The functions that receive the call's key as their ``idempotency_key``.
        self.takes_key = declared._takes_key
        self.read_back_takes_key = declared.read_back is not None and takes_key(declared.read_back)
        # Checking and redacting a call's arguments in one pass, where they fuse
        # (a redactor of toolspan's own rules and a schema of plain fields).
        hashing = core.hashing
        self.quick_arguments = (
            redacting_acceptor(declared, hashing) if type(hashing) is Redactor else None
        )


class Core:
    """Every decision of the sync and async executors; performs no waiting.

    A driver builds a :class:`Run` and calls :meth:`begin`, then feeds each
    action's outcome back through :meth:`returned`, :meth:`raised` or
    :meth:`slept`; each returns the next action.
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
        capture_arguments: Capture = "redacted",
        capture_results: Capture = "off",
    ) -> None:
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
        _check_references(self.tools)
        # An unknown tool's answer lists the tools that exist, so the model can pick one.
        self._unknown_next = Next(
            "there is no tool by that name: use one of the listed tools", tuple(self.tools)
        )
        self.policy = policy or RetryPolicy()
        self.spans = SpanWriter(tracer_provider, span_clock)
        self.redactor = redactor or Redactor()
        # Argument hashes are over the secret-redacted arguments whatever else is
        # masked (personal data), so that masking never makes two calls look alike.
        self.hashing = self.redactor._secrets_only()
        # What every call of a tool shares is decided here, once per tool.
        self._plans = {name: _Plan(declared, self) for name, declared in self.tools.items()}
        # The arguments' redaction, bound once; a subclass keeps its own ``value``.
        self._redact_arguments: Callable[[dict[str, Any]], Any] = (
            self.hashing.arguments if type(self.hashing) is Redactor else self.hashing.value
        )
        self.hash_key = hash_key.encode() if isinstance(hash_key, str) else hash_key
        self.max_result_bytes = check_at_least("Executor", "max_result_bytes", max_result_bytes, 64)
        self.capture_arguments = check_capture("capture_arguments", capture_arguments)
        self.capture_results = check_capture("capture_results", capture_results)
        # The common case records the very bytes the hash was computed over.
        self._arguments_as_hashed = (
            capture_arguments == "redacted" and self.hashing is self.redactor
        )
        self.clock = clock
        # An unreachable store fails every call alike: warn at a bounded rate.
        self._store_warning = ThrottledWarning(_log, clock=clock)
        # A live process gets an unseeded generator; tests inject a seeded one.
        self.rng = rng or random.Random()
        self.hooks = tuple(hooks)
        # The read tools that answer "did that write happen?" for some write.
        self.check_tools = frozenset(t.check_with for t in self.tools.values() if t.check_with)
        # Outside ``executor.run(...)`` the executor is one delivery (see ``_run``).
        self.delivery_id = new_delivery_id()

    # -- the driver's entry points: each returns the next action -------------------

    def begin(self, run: Run) -> Action:
        """Validate the call and open its span, then admit it."""
        call = run.call
        current = CURRENT_RUN.get()
        if current is None:
            run.delivery = self.delivery_id
        else:
            run.delivery = current.delivery_id
            call = run.call = _inherit(call, current)
        plan = self._plans.get(call.name)
        if plan is None:
            span = self.spans.start_call(call, base_attributes(call, None), None)
            return self._refused(
                span,
                call,
                None,
                "unknown_tool",
                f"no tool named {call.name!r}",
                self._unknown_next,
            )
        declared = plan.tool
        arguments, problem, redacted = parse_arguments(
            declared, call.arguments, plan.quick_arguments
        )
        if redacted is None:
            redacted = self._redact_arguments(arguments)
        if plan.keyed_safe and call.idempotency_key is None and problem is None:
            call = run.call = _derive_key(call, declared, arguments)
        hash_key = self.hash_key
        try:
            args_bytes = canonical_json(redacted)
            if hash_key is None:
                args_hash = _sha256(args_bytes).hexdigest()
            else:
                raw_bytes = canonical_json(arguments) if hash_key else args_bytes
                args_hash = digest(raw_bytes, hash_key)
        except orjson.JSONEncodeError:
            span = self.spans.start_call(call, base_attributes(call, declared), None)
            return self._refused(span, call, declared, "invalid_arguments", _UNENCODABLE)
        base = base_attributes(call, declared)
        if plan.keys_resources and problem is None:
            resource = resource_of(declared, arguments)
            if resource is not None:
                base[attr.RESOURCE_KEY] = self.redactor.text(resource)
        if plan.takes_key and problem is None and KEY_PARAMETER in arguments:
            problem = f"{KEY_PARAMETER!r} is set by the executor, not in the arguments"
        run.span = self.spans.start_call(
            call,
            base,
            args_bytes.decode() if self._arguments_as_hashed else self._arguments_json(arguments),
            args_hash,
            plan.schema_version,
            plan.service,
        )
        if problem is not None:
            return self._refused(run.span, call, declared, "invalid_arguments", problem)
        run.tool = declared
        run.plan = plan
        run.arguments = arguments
        run.tool_kwargs = (
            {**arguments, KEY_PARAMETER: call.idempotency_key} if plan.takes_key else arguments
        )
        run.args_hash = args_hash
        run.started_at = self.clock()
        run.base_attributes = base
        run.safe_to_repeat = plan.always_safe or (plan.keyed_safe and bool(call.idempotency_key))
        if self.safeguards is None:
            return self._start_attempt(run)
        return self._admit(self.safeguards, run)

    def returned(self, run: Run, value: Any) -> Action:
        """What the pending INVOKE returned: an attempt's value is checked and
        packaged (closing the attempt span), a read-back's answer weighed."""
        if run.asking != _ATTEMPT:
            return self._read_back_answered(run, value)
        self._leave(run)
        if run.admission is not None:
            self._report(run, failed=False)
        declared = run.tool
        if declared.result_schema is not None:
            problem = check_result(declared, value)
            if problem is not None:
                self.spans.attempt_invalid_response(run.attempt_span)
                self._attempt_done(run, "invalid_response", 0.0)
                return self._failed(run, "invalid_response", "invalid_response", problem)
        self.spans.attempt_succeeded(run.attempt_span)
        if self.hooks:
            self._attempt_done(run, "ok", 0.0)
        return self._finish_ok(run, value)

    def raised(self, run: Run, exc: Exception) -> Action:
        """What the pending INVOKE raised; re-raises a programming error."""
        if run.asking != _ATTEMPT:
            _log.warning(
                "read-back of %s failed (%s); its outcome stays unknown",
                run.call.name,
                type(exc).__name__,
            )
            return self._read_back_answered(run, _UNKNOWN)
        self._leave(run)
        run.ended_at = self.clock()
        error = to_tool_error(exc)
        if error is None:
            self._crashed(run, exc)
            raise exc  # a programming error propagates, after both spans recorded it
        run.error = error
        if run.admission is not None:
            self._report(run, failed=error.code in run.plan.policy.retryable_codes)
        if run.tool.read_back is not None and error.code in AMBIGUOUS_CODES:
            # An ambiguous write failure the tool can settle by reading back: the
            # read-back runs before any repeat, keyed or not. A key protects only
            # where the service honours it; a read-back sees the effect either way.
            return self._ask_read_back(run, _READ_BACK_AFTER_FAILURE)
        return self._classify(run, error, _SKIPPED)

    def slept(self, run: Run, delay_s: float) -> Action:
        """The driver waited ``delay_s`` as a :class:`Sleep` asked."""
        run.total_wait_s = round(run.total_wait_s + delay_s, 2)
        if self.safeguards is None:
            return self._start_attempt(run)
        return self._spend_attempt(self.safeguards, run)

    # -- around each attempt ------------------------------------------------------

    @staticmethod
    def _ask_read_back(run: Run, asking: int) -> Invoke:
        read_back = run.tool.read_back
        assert read_back is not None
        run.fn = read_back
        run.kwargs = (
            {**run.arguments, KEY_PARAMETER: run.call.idempotency_key}
            if run.plan.read_back_takes_key
            else run.arguments
        )
        run.asking = asking
        return INVOKE

    def _start_attempt(self, run: Run) -> Action:
        """Open the next attempt's span and make it current, expose the call to
        the tool, and keep a claimed key's lease alive (:meth:`_leave` undoes it).
        The circuit breaker, when there is one, may refuse the attempt first."""
        if self._per_service:
            refused = self._per_service_gate(run)
            if refused is not None:
                return refused
        if run.claim_token is not None:
            refused = self._confirm_claim(run)
            if refused is not None:
                return refused
        run.attempt += 1
        admission = run.admission
        run.attempt_span, run.context_token = self.spans.start_attempt(
            run.span,
            run.call.name,
            run.base_attributes,
            run.attempt,
            run.total_wait_s,
            admission is not None and admission.probe is not None,
        )
        run.call_token = _CURRENT_CALL.set(run.call)
        if run.claim_token is not None and self.safeguards is not None:
            assert run.call.idempotency_key is not None
            run.keeper = self.safeguards.keep_lease(
                run.call.idempotency_key, run.claim_token, run.plan.lease_s
            )
        run.fn = run.tool.fn
        run.kwargs = run.tool_kwargs
        run.asking = _ATTEMPT
        return INVOKE

    def _leave(self, run: Run) -> None:
        if run.keeper is not None:
            run.keeper.stop()
            run.keeper = None
        _CURRENT_CALL.reset(run.call_token)
        self.spans.detach(run.context_token)

    def _read_back_answered(self, run: Run, answer: Any) -> Action:
        if run.asking == _READ_BACK_FIRST:
            return self._reconcile(run, answer)
        assert run.error is not None
        return self._classify(run, run.error, answer)

    def _verdict(self, run: Run, answer: Any) -> str:
        """What a read-back answer says about the write's effect: ``"found"``,
        ``"absent"``, ``"pending"`` (absent, but a request may still commit: see
        `_pending_s`) or ``"failed"`` (the read-back raised).

        The one place that decides when "absent" is trusted, i.e. when a write
        whose outcome was unknown may run (again): after a failed attempt and
        before a claimed key whose earlier effect is unknown alike.
        """
        if answer is _UNKNOWN:
            return "failed"
        if answer is NOT_PENDING:
            return "absent"  # the service says no request for it can still commit
        if answer is not None:
            return "found"
        return "pending" if self._pending_s(run) > 0 else "absent"

    def _pending_s(self, run: Run) -> float:
        """How long a request for this write may still commit (0: none can).

        After a failed attempt: the tool's ``commit_window_s`` from its end. For a
        key the store lost: the lease its lost record could have had, from the loss
        (a request sent before may still be at the service). A service that honours
        the key dedupes a late request, so absence is trusted at once."""
        if self._keyed(run):
            return 0.0
        if run.asking == _READ_BACK_AFTER_FAILURE and run.ended_at is not None:
            until = run.ended_at + run.tool.commit_window_s
        elif run.asking == _READ_BACK_FIRST and run.pending_since is not None:
            until = run.pending_since + run.plan.lease_s
        else:
            return 0.0
        return max(0.0, until - self.clock())

    @staticmethod
    def _keyed(run: Run) -> bool:
        """A write whose call has a key its service honours (``idempotent``)."""
        return run.plan.keyed_safe and bool(run.call.idempotency_key)

    def _classify(self, run: Run, error: ToolError, read_back: Any) -> Sleep | ToolResult:
        """After a failed attempt: a final result, or a sleep before the retry.

        ``read_back`` is the tool's read-back answer after an ambiguous write
        failure (``_SKIPPED`` when none was made, ``_UNKNOWN`` when it failed).
        """
        if read_back is not _SKIPPED:
            verdict = self._verdict(run, read_back)
            run.attempt_span.set_attribute(attr.READ_BACK, verdict)
            run.span.set_attribute(attr.READ_BACK, verdict)
            if verdict == "found":
                self._attempt_failed(run, error, 0.0)
                return self._finish_ok(run, read_back, reconciled=True)
            if verdict == "pending":
                self._attempt_failed(run, error, 0.0)
                return self._still_pending(run, error, self._pending_s(run))
            # The effect is absent: running the write once more is safe. A failed
            # read-back leaves what a key protects (where the service honours it).
            run.safe_to_repeat = verdict == "absent" or self._keyed(run)
        decision = run.plan.policy.decide(
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
        self._attempt_failed(run, error, decision.delay_s)
        # An unprotected write that failed ambiguously, with no read-back to say
        # the effect is absent: it may or may not have happened.
        effect_unknown = (
            run.tool.is_write and error.code in AMBIGUOUS_CODES and not run.safe_to_repeat
        )
        if run.tool.is_write and not self._keyed(run):
            run.safe_to_repeat = False  # a read-back's "absent" covers one repeat only
        if refused:
            assert self.retry_budget is not None
            return self._failed(
                run,
                "retry_budget",
                error.code,
                f"the retry budget of service {run.tool.service!r} allows no more "
                f"retries in this {self.retry_budget.window_s:g}s window; not retried: "
                + self.redactor.text(error.message),
                http_status=error.status_code,
            )
        if not decision.retry:
            return self._stopped(run, error, decision, effect_unknown=effect_unknown)
        return Sleep(decision.delay_s)

    # -- retry budget and circuit breaker (per downstream service) ----------------

    def _per_service_gate(self, run: Run) -> ToolResult | None:
        """Before an attempt: the breaker admits it (or the call ends
        ``circuit_open``), and the budget counts a first attempt."""
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
        return None

    def _budget_refuses(self, budget: RetryBudget, run: Run) -> bool:
        """Ask the budget for one retry; True when it refuses (checked before sleeping)."""
        service = run.tool.service
        verdict = budget.allow_retry(service)
        if verdict.failed_open:
            run.span.set_attribute(attr.RETRY_BUDGET_FAILED_OPEN, True)
            return False
        if verdict.allowed:
            return False
        self.spans.budget_refused(run.span, service, verdict)
        return True

    def _pass_breaker(self, breaker: CircuitBreaker, run: Run) -> ToolResult | None:
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
        return self._failed(
            run,
            "circuit_open",
            "circuit_open" if error is None else error.code,
            f"the circuit breaker of service {service!r} is {state.replace('_', '-')}: "
            "calls fail fast while it recovers; nothing was executed"
            + ("" if error is None else " after the last failure"),
            http_status=None if error is None else error.status_code,
        )

    def _report(self, run: Run, *, failed: bool) -> None:
        """Tell the breaker how the admitted attempt ended (``failed``: retryable)."""
        breaker, admission = self.circuit_breaker, run.admission
        assert breaker is not None and admission is not None
        run.admission = None
        transition = breaker.record(run.tool.service, admission, failed=failed)
        if transition is not None:
            self._transitioned(run, transition)

    def _transitioned(self, run: Run, transition: Transition) -> None:
        self.spans.circuit_transition(
            run.span, transition.service, transition.before, transition.after
        )

    # -- after an attempt -------------------------------------------------------------

    def _attempt_failed(self, run: Run, error: ToolError, delay_s: float) -> None:
        self.spans.attempt_failed(run.attempt_span, error, self._detail(error), delay_s)
        self._attempt_done(run, error.code, delay_s)

    def _attempt_done(self, run: Run, outcome: str, delay_s: float) -> None:
        if self.hooks:
            dispatch_attempt(
                self.hooks,
                run.call.name,
                run.call.call_id,
                run.attempt,
                outcome,
                delay_s,
                run.total_wait_s,
            )

    def _stopped(
        self, run: Run, error: ToolError, decision: Decision, *, effect_unknown: bool
    ) -> ToolResult:
        status: Status = decision.status or "permanent_error"
        code = error.code
        if effect_unknown:
            # The write may or may not have happened: say so, never guess. This
            # holds for a non-retryable code too (a dropped connection).
            status, code = "unsafe_retry", "unknown_outcome"
        detail = self._detail(error)
        return self._failed(
            run,
            status,
            code,
            f"{_STOP_REASONS.get(status, status)}: {detail}",
            retry_after_s=decision.retry_after_s,
            http_status=error.status_code,
        )

    def _detail(self, error: ToolError) -> str:
        # A peer's error text is capped like its results (redacted first: no half secret).
        return cap_text(self.redactor.text(error.message), self.max_result_bytes)

    def _crashed(self, run: Run, exc: BaseException) -> None:
        """A programming error: record it on both spans (it propagates then)."""
        if run.admission is not None and self.circuit_breaker is not None:
            # Not the service's fault: free a probe slot, count nothing.
            self.circuit_breaker.release(run.tool.service, run.admission)
            run.admission = None
        self.spans.crashed(
            run.attempt_span,
            run.span,
            type(exc).__qualname__,
            self.redactor.text(str(exc)),
            run.attempt,
            run.total_wait_s,
        )
        key = run.call.idempotency_key
        if self.safeguards is not None and run.claim_token and key:
            self.safeguards.abandon(key, run.claim_token, run.call.call_id)

    # -- what the call span records of arguments and results -------------------------

    def _arguments_json(self, arguments: dict[str, Any]) -> str | None:
        """The arguments as ``capture_arguments`` records them (``None``: not at all)."""
        level = self.capture_arguments
        if level == "off":
            return None
        if level == "keys":
            shown = keys_only(arguments)
        elif level == "full":
            shown = arguments
        else:
            redactor = self.redactor
            shown = (
                redactor.arguments(arguments)
                if type(redactor) is Redactor
                else redactor.value(arguments)
            )
        return canonical_json(shown).decode()

    def _result_json(self, value: Any, encoded: bytes) -> str:
        """A successful result as ``capture_results`` records it, cut to the size cap."""
        level = self.capture_results
        if level == "full":
            shown = encoded
        else:
            shown = canonical_json(
                keys_only(value) if level == "keys" else self.redactor.value(value)
            )
        # Cut on a UTF-8 character boundary so the text stays valid.
        return shown[: self.max_result_bytes].decode("utf-8", errors="ignore")

    # -- the final result -----------------------------------------------------------

    def _finish_ok(
        self, run: Run, value: Any, *, reconciled: bool = False, replayed: bool = False
    ) -> ToolResult:
        data, encoded, result_hash, truncated, message = package(value, self.max_result_bytes)
        call = run.call
        result = ToolResult(
            True,
            "succeeded",
            call.name,
            call.call_id,
            None,
            False,
            data,
            message,
            run.attempt,
            run.total_wait_s,
            None,
            truncated,
            replayed,
            reconciled,
        )
        if self.safeguards is not None:
            self._remember(self.safeguards, run, result, encoded, result_hash)
        if self.capture_results != "off":
            run.span.set_attribute(attr.TOOL_CALL_RESULT, self._result_json(value, encoded))
        self.spans.call_succeeded(run.span, result, result_hash)
        if self.hooks:
            dispatch_call(self.hooks, result)
        return result

    def _failed(
        self,
        run: Run,
        status: Status,
        error_code: str,
        message: str,
        *,
        retry_after_s: float | None = None,
        http_status: int | None = None,
        remember: bool = True,
    ) -> ToolResult:
        call = run.call
        result = ToolResult(
            False,
            status,
            call.name,
            call.call_id,
            error_code,
            status in RETRYABLE_STATUSES,
            None,
            message or status,
            run.attempt,
            run.total_wait_s,
            retry_after_s,
            False,
            False,
            False,
            next_step(run.tool, status, error_code, retry_after_s),
        )
        if remember and self.safeguards is not None:
            self._remember(self.safeguards, run, result, None, None)
        self._close(run.span, result, None, http_status)
        return result

    def _refused(
        self,
        span: Span,
        call: ToolCall,
        declared: Tool | None,
        status: Status,
        message: str,
        next_: Next | None = None,
    ) -> ToolResult:
        """The result of a call that never ran (its call span is open)."""
        result = ToolResult(
            ok=False,
            status=status,
            tool=call.name,
            call_id=call.call_id,
            error_code=status,
            message=self.redactor.text(message),
            next=next_ if next_ is not None else next_step(declared, status, status),
        )
        self._close(span, result, None, None)
        return result

    def _close(
        self, span: Span, result: ToolResult, result_hash: str | None, http_status: int | None
    ) -> None:
        self.spans.close_call(span, result, result_hash, http_status)
        if self.hooks:
            dispatch_call(self.hooks, result)

    # -- safeguards (idempotency store, turn budget, loop guard) ----------------

    def _admit(self, guards: Safeguards, run: Run) -> Action:
        """Consult the store before anything runs."""
        call = run.call
        run.call_identity = f"{call.name}:{run.args_hash}"
        try:
            repeated = guards.repeated_failure(call.conversation_id, run.call_identity)
            if repeated is not None and repeated != call.call_id:
                run.span.set_attributes({attr.RETRY_INITIATOR: "model", attr.RETRY_OF: repeated})
            quarantine = find_quarantine(
                guards.store,
                call.conversation_id,
                call.name,
                run.call_identity,
                resource_of(run.tool, run.arguments),
            )
            if quarantine is not None:
                run.span.set_attribute(attr.QUARANTINE_ID, quarantine.id)
                return self._failed(
                    run,
                    "quarantined",
                    "quarantined",
                    f"quarantined ({quarantine.scope}): {quarantine.reason}; nothing was executed",
                )
            budgeted = guards.budgets(run.tool.name, run.tool.is_write)
            if budgeted and guards.is_loop(call.conversation_id, run.call_identity, _within(run)):
                return self._failed(
                    run,
                    "loop_blocked",
                    "loop_blocked",
                    "this exact call already got the same answer "
                    f"{guards.loop_threshold} times in this conversation; change the "
                    "arguments or stop",
                )
            if call.idempotency_key and run.tool.is_write:
                return self._claim(guards, run, call.idempotency_key)
            if run.tool.is_write and not call.idempotency_key:
                checked = guards.check_state(call.conversation_id, run.call_identity)
                if checked is not None and guards.write_pending(
                    call.conversation_id, run.call_identity
                ):
                    return self._failed(
                        run,
                        "in_progress",
                        "in_progress",
                        "an earlier run of this exact write in this conversation may still "
                        "be committing at its service; nothing was executed",
                    )
                if checked == "waiting":
                    return self._check_first(run)
                if checked == "checked":  # the model asked the check tool first
                    run.span.set_attribute(attr.READ_BACK, "checked")
        except StoreError as exc:
            return self._store_failed(run, exc)
        return self._spend_attempt(guards, run)

    def _claim(self, guards: Safeguards, run: Run, key: str) -> Action:
        fingerprint = digest(canonical_json(run.arguments), self.hash_key)
        claim = guards.claim(key, fingerprint, run.plan.lease_s)
        if claim.outcome == "replay":
            return self._finish_ok(run, orjson.loads(claim.result or b"null"), replayed=True)
        if claim.outcome == "conflict":
            return self._failed(
                run,
                "idempotency_conflict",
                "idempotency_conflict",
                "this idempotency key was already used with different arguments",
            )
        if claim.outcome == "in_progress":
            return self._failed(
                run,
                "in_progress",
                "in_progress",
                "another call with this idempotency key is running; try again later",
            )
        run.claim_token = claim.token
        if claim.outcome == "takeover":
            run.span.set_attribute(attr.IDEMPOTENCY_TAKEOVER, True)
        lost = claim.store_lost and guards.detect_store_loss
        if lost:
            run.span.set_attribute(attr.STORE_LOST, True)
            # The store forgot this key's arguments: an effect found by the read-back
            # (or deduplicated by a keyed service) may come from a call with other
            # arguments, so neither a result nor an unknown outcome is kept under this
            # call's fingerprint; the next call of the key asks the service again.
            run.binds = False
            if run.tool.read_back is None and not run.tool.idempotent:
                return self._failed(
                    run,
                    "store_unavailable",
                    "store_unavailable",
                    "the idempotency store lost data recently (a restart, a flush or "
                    "a replaced store), so this action may already have completed; the tool "
                    "declares no read-back: nothing was executed",
                )
        new = claim.store_new and guards.detect_store_loss
        if new:
            run.span.set_attribute(attr.STORE_NEW, True)
        if lost and claim.suspect_for_s is not None:
            # A request for this key sent before the store lost it may still commit.
            run.pending_since = self.clock() - claim.suspect_for_s
        if not lost and not guards.must_read_back(key, claim):
            if not (new and run.tool.read_back):
                return self._spend_attempt(guards, run)
            # A store that looks new may have restarted empty before a worker that knew
            # it noticed: read back first; an effect found may be a forgotten one.
            run.binds = False
        run.span.set_attribute(attr.READ_BACK, "required")
        if run.tool.read_back is None:
            return self._reconcile(run, _SKIPPED)
        return self._ask_read_back(run, _READ_BACK_FIRST)

    def _check_first(self, run: Run) -> Action:
        """A repeat of an unkeyed write whose last outcome is unknown: check before it runs."""
        run.span.set_attribute(attr.READ_BACK, "required")
        if run.tool.read_back is not None:
            return self._ask_read_back(run, _READ_BACK_FIRST)
        check = run.tool.check_with
        how = f"call {check} first" if check else "no check tool is declared for it"
        return self._failed(
            run,
            "read_back_required",
            "read_back_required",
            "an earlier run of this exact write in this conversation ended with an "
            f"unknown outcome; it may have happened: {how}",
        )

    def _reconcile(self, run: Run, answer: Any) -> Action:
        """Before executing a key whose earlier effect is unknown: the read-back says."""
        guards = self.safeguards
        assert guards is not None  # only a guarded run holds a claim
        if answer is _SKIPPED:
            if run.tool.idempotent:
                # The service honours the key: executing again is safe.
                return self._spend_attempt(guards, run)
            return self._failed(
                run,
                "unsafe_retry",
                "unknown_outcome",
                "an earlier run of this action ended with an unknown outcome and the "
                "tool declares no read-back",
            )
        verdict = self._verdict(run, answer)
        run.span.set_attribute(attr.READ_BACK, verdict)
        if verdict == "found":
            return self._finish_ok(run, answer, reconciled=True)
        if verdict == "failed":
            return self._failed(
                run,
                "unsafe_retry",
                "unknown_outcome",
                "the read-back failed, so the earlier run's outcome stays unknown",
            )
        if verdict == "pending":
            # Treated as a record in flight (its owner last seen when the store lost
            # it): held, so no worker runs the key before that lease would have ended.
            wait = self._pending_s(run)
            run.hold_until = self.clock() + wait
            return self._failed(
                run,
                "in_progress",
                "in_progress",
                "the idempotency store lost its records recently, so a request for "
                "this key may still be in flight at the service; nothing was executed",
                retry_after_s=round(wait, 3),
            )
        run.binds = True  # absent: what runs now is this call's own effect
        return self._spend_attempt(guards, run)

    def _still_pending(self, run: Run, error: ToolError, wait: float) -> ToolResult:
        """The read-back found nothing, but the failed request may still commit."""
        run.hold_until = self.clock() + wait
        return self._failed(
            run,
            "unsafe_retry",
            "unknown_outcome",
            "the read-back found no effect, but the service may still commit the request "
            f"for {wait:.3g} s (the tool's commit_window_s), so it was not repeated: "
            + self.redactor.text(error.message),
            retry_after_s=round(wait, 3),
            http_status=error.status_code,
        )

    def _spend_attempt(self, guards: Safeguards, run: Run) -> Action:
        """Spend one attempt of the turn budget, then start the attempt."""
        key = run.call.idempotency_key
        if not guards.budgets(run.tool.name, run.tool.is_write):
            return self._start_attempt(run)
        try:
            within_budget = guards.spend_attempt(
                run.call.request_id, key or run.call_identity, delivery=run.delivery
            )
        except StoreError as exc:
            return self._store_failed(run, exc)
        if within_budget:
            return self._start_attempt(run)
        return self._failed(
            run,
            "turn_budget",
            "turn_budget",
            f"this action used its {guards.max_attempts_per_action} attempts for this request",
        )

    def _confirm_claim(self, run: Run) -> ToolResult | None:
        """Right before every attempt of a claimed key: renew its lease, or stop.

        The last store step before the tool runs. Whatever came between the
        claim and here (a read-back, a retry's wait, a stalled process) may have
        outlasted the lease, and another worker may have taken the key over and
        run the write: then this one must not run it too. Exclusive as long as no
        worker stalls longer than the lease between here and its request. With the
        tool's ``attempt_timeout_s``, the lease set here also outlasts the request
        and its commit window, whether or not the renewals during it reach the store.
        """
        guards, key, token = self.safeguards, run.call.idempotency_key, run.claim_token
        assert guards is not None and key is not None and token is not None
        try:
            if guards.renew(key, token, run.plan.lease_s):
                return None
        except StoreError as exc:
            result = self._store_failed(run, exc)
            assert isinstance(result, ToolResult)  # a claim is held by writes only
            return result
        run.claim_token = None  # another worker took the key over: it settles it
        return self._failed(
            run,
            "in_progress",
            "in_progress",
            "another worker took over this idempotency key",
        )

    def _store_failed(self, run: Run, exc: StoreError) -> Action:
        self._store_warning.warning("idempotency store failed: %s", self.redactor.text(str(exc)))
        if not run.tool.is_write:
            # A read is safe to run unguarded: availability over the loop guard.
            run.claim_token = None
            run.call_identity = ""  # and nothing more to record in a store that is down
            return self._start_attempt(run)
        # Fail closed: without the store a write could run twice.
        return self._failed(
            run,
            "store_unavailable",
            "store_unavailable",
            "the idempotency store is unavailable; nothing was executed",
            remember=False,  # the store is down: nothing more to record in it
        )

    def _remember(
        self,
        guards: Safeguards,
        run: Run,
        result: ToolResult,
        encoded: bytes | None,
        result_hash: str | None,
    ) -> None:
        """Record the result in the store: settle the claim, count the answer."""
        call = run.call
        try:
            token = run.claim_token
            if token is not None and call.idempotency_key:
                run.claim_token = None
                last_code = run.error.code if run.error is not None else None
                effect_unknown = (
                    last_code in AMBIGUOUS_CODES or result.error_code == "unknown_outcome"
                )
                guards.settle(
                    call.idempotency_key,
                    token,
                    call.call_id,
                    result=None if result.replayed else encoded,
                    effect_unknown=effect_unknown,
                    binds=run.binds,
                    hold_s=None if result.ok else self._hold_s(run, effect_unknown),
                )
            if run.call_identity:
                answer = result_hash if result.ok else (result.error_code or result.status)
                guards.record_result(
                    call.conversation_id,
                    run.call_identity,
                    call.call_id,
                    result.status,
                    str(answer),
                    result.ok,
                    # A replay ran nothing: it is no answer of the tool's, so a
                    # request handled again (a queue's redelivery) is not a loop.
                    counted=not result.replayed
                    and guards.budgets(run.tool.name, run.tool.is_write),
                    within=_within(run),
                )
            self._remember_checks(guards, run, result)
        except StoreError as exc:
            # The result is decided; losing guard bookkeeping must not change it.
            self._store_warning.warning(
                "could not record the result in the store: %s", self.redactor.text(str(exc))
            )

    def _hold_s(self, run: Run, effect_unknown: bool) -> float | None:
        """How long a claim ending unsettled stays held: while its last request may
        still commit (None: not at all)."""
        until = run.hold_until
        # Only where something can tell later (a read-back, a check tool): otherwise
        # the outcome stays unknown whenever it is asked, and holding only delays that.
        can_tell = run.tool.read_back is not None or run.tool.check_with is not None
        if effect_unknown and can_tell and run.ended_at is not None and not self._keyed(run):
            until = max(until or 0.0, run.ended_at + run.tool.commit_window_s)
        if until is None:
            return None
        left = until - self.clock()
        return left if left > 0 else None

    def _remember_checks(self, guards: Safeguards, run: Run, result: ToolResult) -> None:
        """Unkeyed writes left unknown wait for a check; a check tool's success clears them."""
        call = run.call
        if result.ok and call.name in self.check_tools:
            guards.note_checked(call.conversation_id, call.name)
        if not run.tool.is_write or call.idempotency_key or not run.call_identity:
            return
        if result.error_code == "unknown_outcome":
            guards.await_check(call.conversation_id, run.call_identity, run.tool.check_with)
            hold_s = self._hold_s(run, effect_unknown=True)
            if hold_s is not None:  # neither a check nor a read-back can tell yet
                guards.hold_write(call.conversation_id, run.call_identity, call.call_id, hold_s)
        elif result.attempts or result.reconciled:  # it ran again, or a read-back settled it
            guards.forget_check(call.conversation_id, run.call_identity)


def _inherit(call: ToolCall, current: AgentRun) -> ToolCall:
    """A call inside ``executor.run(...)`` takes the run's ids where it has none."""
    request_id = call.request_id or current.request_id
    conversation_id = call.conversation_id or current.conversation_id
    if (request_id, conversation_id) == (call.request_id, call.conversation_id):
        return call
    return replace(call, request_id=request_id, conversation_id=conversation_id)


def _within(run: Run) -> str:
    """Where the loop guard counts answers: one delivery of the call's request
    (a redelivery starts afresh), or the conversation when there is no request id."""
    request_id = run.call.request_id
    return f"{request_id}:{run.delivery}" if request_id else ""


def _derive_key(call: ToolCall, declared: Tool, arguments: dict[str, Any]) -> ToolCall:
    """An idempotent write's key, as the adapters derive it (``derive_key(request_id,
    step)``), so a call gets the same key whichever way it was built."""
    if not call.request_id:
        _warn_keyless(declared.name)
        return call
    step = step_of(declared.name, None, declared.resource_key, arguments)
    if step is None:
        return call  # no key: runs once, never twice
    return replace(call, idempotency_key=derive_key(call.request_id, step))


def _warn_keyless(name: str) -> None:
    """Once per tool: without a request id an idempotent write has no key."""
    if not first_time("keyless", name):
        return
    _log.warning(
        "%s is an idempotent write called without a request_id: it runs with no "
        "idempotency key, so it is not retried after an unknown outcome; pass "
        "request_id= (or open executor.run(..., request_id=...))",
        name,
    )


def _check_references(tools: dict[str, Tool]) -> None:
    """Every ``check_with`` and ``next_tools`` names a tool the executor has:
    the model is told to call them."""
    for declared in tools.values():
        named = [declared.check_with] if declared.check_with else []
        missing = [name for name in [*named, *declared.next_tools] if name not in tools]
        if missing:
            raise ConfigurationError(
                f"tool {declared.name!r} names tools this executor does not have: "
                + ", ".join(repr(name) for name in missing)
                + "; it has: "
                + ", ".join(repr(name) for name in tools)
            )
