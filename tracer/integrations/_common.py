"""What every adapter shares: the application's declarations and the model-facing reply.

A framework already knows a tool's name, JSON Schema, description and
function. What it cannot know is what only the application knows: whether
the tool writes, whether its service honours an idempotency key, how to read
an effect back, which resource it touches. The application states that once,
as a :class:`Declaration` per tool name in a :class:`Declarations`; an adapter
merges it with the framework's definition into a toolspan :class:`Tool`
(:meth:`Declarations.tool`) and turns each invocation into a :class:`ToolCall`
carrying the derived idempotency key (:meth:`Declarations.tool_call`)::

    declarations = Declarations({
        "get_order": Declaration.read(),
        "refund_order": Declaration.write(idempotent=True, resource_key=by_order,
                                          key_passed="Idempotency-Key header"),
        "cancel_order": Declaration.write(read_back=get_cancellation),
    })
    tool = declarations.tool("refund_order", refund, parameters=schema, description="...")
    call = declarations.tool_call("refund_order", call_id, arguments,
                                  conversation_id=cid, request_id=rid)

**A tool nobody declared is a write that is not idempotent**: the boundary
never repeats it blind (a lost response ends as ``unsafe_retry``). Retry
safety is the application's statement, never inferred from a tool's name or
from hints a remote server sends (the MCP adapter uses those only on opt-in).

**Keys.** An idempotent write gets ``derive_key(request_id, step)``: the
request id stays the same across retries and re-plans, and the step names
the action within the request. By default the step is the tool name, plus
the resource key when one is declared (``"refund_order:A-1001"``); pass
``step=`` (a fixed name or a function of the arguments) for another scheme.
Without a request id no key can be derived, so the write is not retried.
The framework calls the tool's function itself, so the key reaches the
service through the function's HTTP client (an httpx client built with
``event_hooks={"request": [send_idempotency_key()]}``) or
:func:`~toolspan.tracer.current_call`; say which with ``key_passed``: an
idempotent write without it is a ``ConfigurationError`` (MCP sends it in
``_meta`` and says so itself).

**Replies.** :func:`model_reply` is how a failure reaches the model in every
adapter: as the framework's native *error result* (``is_error``, an error
status, ...), whose text is the structured :class:`ToolResult` JSON, so the
model sees ``status``, ``error_code`` and ``retryable`` instead of an
exception that ends the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from .._errors import ConfigurationError
from .._executor import AsyncExecutor, Executor
from .._result import ToolResult
from .._tool import DEFAULT_COMMIT_WINDOW_S, SideEffect, Tool, ToolCall
from ..store import derive_key
from ..store._keys import step_of

__all__ = [
    "Declaration",
    "Declarations",
    "ModelReply",
    "execute_all",
    "execute_all_async",
    "model_reply",
]

Arguments = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Declaration:
    """What the application states about one tool; build with :meth:`read` or :meth:`write`.

    ``step`` names the logical action for idempotency keys: a fixed name or a
    function of the arguments (see the module docstring for the default).
    ``retryable_codes`` overrides the executor's policy for this tool.
    ``key_passed`` says how an idempotent write's key reaches its service
    (see :class:`~toolspan.tracer.Tool`), e.g. ``"Idempotency-Key header"``
    for a tool whose httpx client sends it with
    :func:`~toolspan.tracer.send_idempotency_key`. ``commit_window_s`` is how
    long after an attempt ended the service may still commit it (see
    :class:`~toolspan.tracer.Tool`; a read-back's "absent" waits it out);
    ``attempt_timeout_s`` the longest one request is in flight (the client's own
    timeout), which the key's lease then covers. ``keys_honoured`` states whether
    the service honours idempotency keys (``None``: unknown; see
    :class:`~toolspan.tracer.Tool`).
    """

    side_effect: SideEffect = "write"
    idempotent: bool = False
    read_back: Callable[..., Any] | None = None
    resource_key: Callable[[Arguments], str] | None = None
    step: str | Callable[[Arguments], str] | None = None
    retryable_codes: frozenset[str] | None = None
    result_schema: Mapping[str, Any] | None = None
    schema_version: str | None = None
    key_passed: str | None = None
    commit_window_s: float = DEFAULT_COMMIT_WINDOW_S
    attempt_timeout_s: float | None = None
    keys_honoured: bool | None = None

    @classmethod
    def read(
        cls,
        *,
        retryable_codes: Iterable[str] | None = None,
        result_schema: Mapping[str, Any] | None = None,
        schema_version: str | None = None,
    ) -> Declaration:
        """A read-only tool: always safe to repeat."""
        return cls(
            side_effect="none",
            retryable_codes=None if retryable_codes is None else frozenset(retryable_codes),
            result_schema=result_schema,
            schema_version=schema_version,
        )

    @classmethod
    def write(
        cls,
        *,
        idempotent: bool = False,
        read_back: Callable[..., Any] | None = None,
        resource_key: Callable[[Arguments], str] | None = None,
        step: str | Callable[[Arguments], str] | None = None,
        retryable_codes: Iterable[str] | None = None,
        result_schema: Mapping[str, Any] | None = None,
        schema_version: str | None = None,
        key_passed: str | None = None,
        commit_window_s: float = DEFAULT_COMMIT_WINDOW_S,
        attempt_timeout_s: float | None = None,
        keys_honoured: bool | None = None,
    ) -> Declaration:
        """A tool that changes state; repeated only under a key its service honours."""
        if step is not None and not idempotent:
            raise ConfigurationError("step names an idempotency key: only for idempotent writes")
        if keys_honoured is not None and not idempotent:
            raise ConfigurationError("keys_honoured is for idempotent writes (idempotent=True)")
        return cls(
            side_effect="write",
            idempotent=idempotent,
            read_back=read_back,
            resource_key=resource_key,
            step=step,
            retryable_codes=None if retryable_codes is None else frozenset(retryable_codes),
            result_schema=result_schema,
            schema_version=schema_version,
            key_passed=key_passed,
            commit_window_s=commit_window_s,
            attempt_timeout_s=attempt_timeout_s,
            keys_honoured=keys_honoured,
        )


# What an undeclared tool is: a write that is never repeated blind.
UNDECLARED = Declaration()


class Declarations:
    """The application's declarations by tool name, and the merge with a framework's tools.

    ``namespace`` goes into every derived key (see
    :func:`toolspan.tracer.store.derive_key`); ``default`` is what an
    undeclared tool is (a non-idempotent write unless you say otherwise).
    """

    __slots__ = ("_declared", "default", "namespace")

    def __init__(
        self,
        declared: Mapping[str, Declaration] | None = None,
        *,
        namespace: str = "toolspan",
        default: Declaration = UNDECLARED,
    ) -> None:
        self._declared: dict[str, Declaration] = dict(declared or {})
        for name, declaration in self._declared.items():
            if not isinstance(declaration, Declaration):
                raise ConfigurationError(
                    f"tool {name!r}: declare it with Declaration.read() or Declaration.write(), "
                    f"not {type(declaration).__name__}"
                )
        self.namespace = namespace
        self.default = default

    @classmethod
    def from_tools(cls, tools: Iterable[Tool], *, namespace: str = "toolspan") -> Declarations:
        """The declarations already made as toolspan :class:`Tool` objects (to derive keys)."""
        return cls(
            {
                declared.name: Declaration(
                    side_effect=declared.side_effect,
                    idempotent=declared.idempotent,
                    read_back=declared.read_back,
                    resource_key=declared.resource_key,
                    retryable_codes=declared.retryable_codes,
                    result_schema=declared.result_schema,
                    schema_version=declared.schema_version,
                    key_passed=declared.key_route,
                    commit_window_s=declared.commit_window_s,
                    attempt_timeout_s=declared.attempt_timeout_s,
                    keys_honoured=declared.keys_honoured,
                )
                for declared in tools
            },
            namespace=namespace,
        )

    @classmethod
    def of(cls, declarations: Declarations | Mapping[str, Declaration] | None) -> Declarations:
        """Accept either form where an adapter takes declarations."""
        return declarations if isinstance(declarations, Declarations) else cls(declarations)

    def __contains__(self, name: object) -> bool:
        return name in self._declared

    @property
    def names(self) -> list[str]:
        """The declared tools' names, in declaration order."""
        return list(self._declared)

    def get(self, name: str) -> Declaration:
        """The declaration for ``name``, or :attr:`default` when there is none."""
        return self._declared.get(name, self.default)

    def with_fallback(self, name: str, fallback: Declaration | None) -> Declaration:
        """``name``'s declaration; ``fallback`` (e.g. opted-in server hints) when undeclared."""
        if name in self._declared or fallback is None:
            return self.get(name)
        return fallback

    def tool(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        parameters: Mapping[str, Any] | None = None,
        description: str = "",
        declaration: Declaration | None = None,
        span_attributes: Mapping[str, str | bool | int | float] | None = None,
        key_passed: str | None = None,
    ) -> Tool:
        """A toolspan :class:`Tool` from a framework's definition merged with the declaration.

        ``declaration`` overrides the lookup by name (adapters pass opted-in
        server hints this way); ``span_attributes`` go on every span of the
        tool's calls (an adapter's protocol attributes); ``key_passed`` is how
        the adapter itself sends an idempotent write's key (MCP: in the
        request's ``_meta``), used when the declaration does not say.
        """
        declared = declaration if declaration is not None else self.get(name)
        if declared.key_passed is not None or not declared.idempotent:
            key_passed = declared.key_passed  # the application's word wins
        return Tool(
            name=name,
            fn=fn,
            side_effect=declared.side_effect,
            idempotent=declared.idempotent,
            parameters=parameters,
            result_schema=declared.result_schema,
            schema_version=declared.schema_version,
            retryable_codes=declared.retryable_codes,
            read_back=declared.read_back,
            resource_key=declared.resource_key,
            description=description,
            span_attributes=span_attributes,
            key_passed=key_passed,
            commit_window_s=declared.commit_window_s,
            attempt_timeout_s=declared.attempt_timeout_s,
            keys_honoured=declared.keys_honoured,
        )

    def key(
        self,
        name: str,
        arguments: Arguments | str | bytes,
        request_id: str,
        *,
        declaration: Declaration | None = None,
    ) -> str | None:
        """The idempotency key of one call, or ``None`` (reads, unkeyed writes, no request id).

        Arguments the step cannot use (not JSON, a missing field) give no key:
        the executor then refuses the call as ``invalid_arguments`` or runs it
        once, never twice.
        """
        declared = declaration if declaration is not None else self.get(name)
        if not (declared.idempotent and request_id):
            return None
        step = _step(name, declared, arguments)
        return None if step is None else derive_key(request_id, step, namespace=self.namespace)

    def tool_call(
        self,
        name: str,
        call_id: str,
        arguments: Arguments | str | bytes,
        *,
        conversation_id: str,
        request_id: str = "",
        turn_id: str = "",
        declaration: Declaration | None = None,
    ) -> ToolCall:
        """The :class:`ToolCall` for one invocation, with its derived key."""
        key = self.key(name, arguments, request_id, declaration=declaration)
        raw = arguments.decode() if isinstance(arguments, bytes) else arguments
        return ToolCall(
            name=name,
            call_id=call_id,
            arguments=raw,
            conversation_id=conversation_id,
            request_id=request_id,
            turn_id=turn_id,
            idempotency_key=key,
        )

    def keyed(self, call: ToolCall) -> ToolCall:
        """``call`` with its derived key, unless it already carries one."""
        if call.idempotency_key is not None:
            return call
        key = self.key(call.name, call.arguments, call.request_id)
        return call if key is None else replace(call, idempotency_key=key)


def _step(name: str, declared: Declaration, arguments: Arguments | str | bytes) -> str | None:
    return step_of(name, declared.step, declared.resource_key, _as_mapping(arguments))


def _as_mapping(arguments: Arguments | str | bytes) -> Arguments | None:
    if isinstance(arguments, Mapping):
        return arguments
    try:
        parsed = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, Mapping) else None


@dataclass(frozen=True, slots=True)
class ModelReply:
    """A result as adapters hand it to the model.

    ``is_error`` selects the framework's native error form; ``text`` is the
    structured result as JSON (what the model reads); ``payload`` is the
    same object, for frameworks that carry structured content; ``data`` is
    the tool's value on success.
    """

    is_error: bool
    text: str
    payload: dict[str, Any]
    data: Any


def model_reply(result: ToolResult) -> ModelReply:
    """The model-facing form of ``result``: an error reply for every failure status."""
    payload = result.to_dict()
    text = orjson.dumps(payload, default=str).decode()
    return ModelReply(not result.ok, text, payload, result.data if result.ok else None)


def execute_all(executor: Executor, calls: Sequence[ToolCall]) -> list[ToolResult]:
    """One model step's calls through ``executor``: a batch (parallel where safe) or one call.

    A single call skips the batch planning, which is all a batch adds for it.
    """
    if len(calls) == 1:
        return [executor.execute(calls[0])]
    return executor.execute_batch(calls)


async def execute_all_async(executor: AsyncExecutor, calls: Sequence[ToolCall]) -> list[ToolResult]:
    """:func:`execute_all` for the :class:`AsyncExecutor`."""
    if len(calls) == 1:
        return [await executor.execute(calls[0])]
    return await executor.execute_batch(calls)
