"""The proxy: every ``tools/call`` through the retry boundary, everything else relayed as is.

A client (stdio, or streamable HTTP through :mod:`._http`) hands messages to
:meth:`McpProxy.handle`. A ``tools/call`` becomes a toolspan call: the
tool's declaration comes from the config (or, when trusted, the server's
annotations; else an unrepeated write), each attempt is one upstream
``tools/call`` with the attempt's trace context and the call's idempotency
key in ``_meta``, and the answer is MCP's ``CallToolResult`` built by
:func:`~toolspan.tracer.integrations.mcp.to_call_tool_result`. Any other
request, notification or response goes to the other side unchanged: the
proxy keeps the client's ids, so progress, cancellation and the server's own
requests (sampling, elicitation) find their way.

Spans follow the OTel MCP conventions: a ``SERVER`` span per request
(``mcp.method.name``, ``jsonrpc.request.id``, ``mcp.protocol.version``,
``error.type``), continuing the client's trace context from ``params._meta``;
toolspan's call and attempt spans are its children.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import LISTEN_STREAM_METHODS, SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    INTERNAL_ERROR,
    REQUEST_TIMEOUT,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)
from mcp_types.methods import is_input_required
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider

from ..._breaker import CircuitBreaker
from ..._budget import RetryBudget
from ..._errors import ConfigurationError, ToolError
from ..._executor import AsyncExecutor, current_call
from ..._policy import parse_retry_after
from ..._result import ToolResult
from ..._safeguards import Safeguards
from ..._tool import Tool
from ...store import IdempotencyStore, MemoryStore
from .._common import Declaration
from ..mcp import (
    IDEMPOTENCY_META_KEY,
    declaration_from_annotations,
    error_code_for,
    to_call_tool_result,
)
from ..mcp import _data as result_data
from ..mcp import _text as result_text
from ._config import ProxyConfig
from ._tasks import FetchWithInput, TaskBook, await_task, task_id_of
from ._upstream import CLOSED, Connect, Pending, Upstream

__all__ = ["CONVERSATION_META_KEY", "REQUEST_META_KEY", "RESULT_META_KEY", "McpProxy", "Reply"]

CONVERSATION_META_KEY = "toolspan/conversation-id"
REQUEST_META_KEY = "toolspan/request-id"
RESULT_META_KEY = "toolspan/result"
# What the proxy reads off a call's ``_meta`` and does not forward as it is.
_TRACE_KEYS = frozenset({"traceparent", "tracestate", "baggage"})
_OWN_KEYS = frozenset({CONVERSATION_META_KEY, REQUEST_META_KEY, IDEMPOTENCY_META_KEY})
_NOT_FORWARDED = _TRACE_KEYS | _OWN_KEYS
# The envelope a 2026-07-28 request carries, copied onto the proxy's own requests.
_ENVELOPE = (
    mcp_types.PROTOCOL_VERSION_META_KEY,
    mcp_types.CLIENT_INFO_META_KEY,
    mcp_types.CLIENT_CAPABILITIES_META_KEY,
)

_TOOLS_CHANGED = "notifications/tools/list_changed"
_INITIALIZED = "notifications/initialized"
_PROGRESS = "notifications/progress"
_LISTEN = "subscriptions/listen"
# JSON-RPC errors of a tools/call a client acts on (URL elicitation: it opens the
# URLs, then calls again): answered as the same error, not as an isError result.
_PASSED_ERRORS = frozenset({mcp_types.URL_ELICITATION_REQUIRED})
_PROGRESS_PREFIX = "toolspan-progress-"
TASK_TTL_MS = 3_600_000
# How an idempotent write's key reaches the upstream (each attempt's ``_meta``).
KEY_PASSED = (
    f"MCP _meta {IDEMPOTENCY_META_KEY}"  # how long the upstream keeps a task the proxy started
)

_log = logging.getLogger("toolspan.mcp_proxy")

Reply = Callable[[JSONRPCMessage], Awaitable[None]]


@dataclass
class _Leg:
    """The client request a ``tools/call``'s answer goes to: the call's own, then,
    after the upstream asked for input, the client's retry carrying its answers."""

    request_id: RequestId
    reply: Reply


@dataclass
class _AwaitingInput:
    """A call waiting for the client's retry with the input the upstream asked for."""

    done: anyio.Event = field(default_factory=anyio.Event)
    params: Mapping[str, Any] = field(default_factory=dict)
    leg: _Leg | None = None


@dataclass
class _CallState:
    """What one ``tools/call`` carries to its attempts (read by the tool functions)."""

    meta: dict[str, Any]
    request_id: RequestId
    conversation: str
    leg: _Leg | None = None
    # An upstream error the client must see as it is (-32042: open these URLs first).
    passed_error: JSONRPCError | None = None
    task: Mapping[str, Any] | None = None  # the client's own ``task`` params, if any
    tool: str = ""
    # The upstream's last answer to this tool (a CallToolResult, as sent): what
    # the client gets, unchanged, when the call succeeds on it.
    upstream: dict[str, Any] | None = None


_CALL: contextvars.ContextVar[_CallState | None] = contextvars.ContextVar(
    "toolspan_mcp_proxy_call", default=None
)


class McpProxy:
    """The boundary between MCP clients and one upstream server.

    ``connect`` opens the upstream (:func:`~._upstream.stdio_upstream` or
    :func:`~._upstream.http_upstream`). ``store`` keeps the guards' state
    (default: in memory, for this process). ``tracer_provider``, ``sleep``,
    ``clock`` and ``rng`` go to the executor (tests inject them); ``conversation_id``
    is the proxy's own run, the conversation of calls that name none.
    """

    def __init__(
        self,
        connect: Connect,
        config: ProxyConfig | None = None,
        *,
        http_upstream: bool = False,
        store: IdempotencyStore | None = None,
        tracer_provider: TracerProvider | None = None,
        conversation_id: str | None = None,
        service: str = "upstream",
        **executor_options: Any,
    ) -> None:
        self.config = config or ProxyConfig()
        self.conversation_id = conversation_id or f"mcp-proxy-{secrets.token_hex(6)}"
        self.service = self.config.service or service
        self._upstream = Upstream(
            connect,
            self._from_upstream,
            http=http_upstream,
            startup_timeout_s=self.config.startup_timeout_s,
        )
        self._store = store or MemoryStore()
        self._tracer_provider = tracer_provider
        self._tracer = trace.get_tracer("toolspan.mcp_proxy", tracer_provider=tracer_provider)
        clock = executor_options.get("clock")
        self._budget = RetryBudget(store=self._store, clock=clock, **self.config.retry_budget)
        self._breaker = CircuitBreaker(
            store=self._store, clock=clock, **self.config.circuit_breaker
        )
        self._executor_options = executor_options
        # Between polls of an upstream task: the executor's sleeper (tests inject one).
        self._poll_sleep = executor_options.get("sleep") or anyio.sleep
        self._executor: AsyncExecutor | None = None
        self._output_schemas: dict[str, Any] = {}
        self._task_support: dict[str, str] = {}  # the listing's execution.taskSupport
        self._declarations = self.config.declarations()
        self._tasks = TaskBook()
        self._listing = anyio.Lock()
        self._client: Reply | None = None  # where unasked upstream messages go (stdio)
        # HTTP serving: the open standalone stream(s) a message sent unasked goes to
        # (None: no stream wants it); set by the HTTP app (``_http.Sessions.route``).
        self.standalone: Callable[[JSONRPCMessage], Reply | None] | None = None
        self._calls: dict[RequestId, anyio.CancelScope] = {}
        # The open subscriptions/listen requests (2026-07-28): their client's reply.
        self._listens: dict[RequestId, Reply] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._call_ids = 0
        # Each running attempt's own progressToken, and the client's it stands for: a
        # late attempt's progress (abandoned, or after the answer) is not forwarded.
        self._progress: dict[str, tuple[Any, _CallState | None]] = {}
        # The calls running now, latest last: where an HTTP client's call gets what
        # the upstream sends mid-call (its log messages, its sampling requests).
        self._running_calls: list[_CallState] = []
        self._progress_ids = 0
        # Calls whose upstream asked for input, by the requestState the client echoes.
        self._awaiting_input: dict[str, _AwaitingInput] = {}
        # The upstream's answer to the first client's initialize, and whether its
        # notifications/initialized went up: later (HTTP) clients share the session.
        self._handshake: anyio.Event | None = None  # set once the first is answered
        self._initialized: dict[str, Any] | None = None
        self._initialized_sent = False

    @property
    def protocol_version(self) -> str | None:
        """The version the upstream's handshake settled on (``None``: none yet, or 2026-07-28)."""
        return self._upstream.protocol_version

    # -- serving ----------------------------------------------------------------------

    async def serve(
        self, read: Any, write: Any, *, closed: Callable[[], object] | None = None
    ) -> None:
        """Serve one client over a stream pair (stdio) until it closes.

        ``closed`` runs as soon as the client is gone, before the upstream is
        shut down (which may take a while): the CLI flushes its spans there.
        """

        async def reply(message: JSONRPCMessage) -> None:
            try:
                await write.send(SessionMessage(message))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                # The client is gone: nobody to answer, and the other calls go on.
                _log.warning("dropped a %s: the client closed its side", type(message).__name__)

        async with self.running():
            self._client = reply
            async for item in read:
                if isinstance(item, Exception):
                    _log.warning("the client sent a message that is not JSON-RPC: %s", item)
                    continue
                await self.handle(item.message, reply)
            if closed is not None:
                closed()

    def running(self) -> _Running:
        """The proxy's task group: ``async with proxy.running(): ...`` around :meth:`handle`."""
        return _Running(self)

    async def handle(self, message: JSONRPCMessage, reply: Reply) -> None:
        """One message from a client; ``reply`` answers this client's requests."""
        assert self._task_group is not None, "use `async with proxy.running()`"
        if isinstance(message, JSONRPCRequest):
            relayed: Pending | anyio.Event | None = None
            started = time.time_ns()
            if message.method == "initialize" and self._handshake is not None:
                # The upstream is initialized once (a server may refuse a second
                # initialize of its session): a later client gets the first's answer.
                relayed = self._handshake
            elif message.method == "tools/call":
                if self._resumed(message, reply):
                    return  # a retry carrying input: the waiting call goes on
                # Its cancellation may come before its task starts: the scope waits for it.
                self._calls[message.id] = anyio.CancelScope()
            else:
                if message.method == "initialize":
                    self._handshake = anyio.Event()
                elif message.method == _LISTEN:
                    # Open until the upstream ends it or the client cancels it; what
                    # the upstream sends for it (by its id) goes to this client.
                    self._calls[message.id] = anyio.CancelScope()
                    self._listens[message.id] = reply
                # Sent here, in the order the client sent it (a notification after it,
                # such as its cancellation, must not overtake it); awaited in its task.
                relayed = await self._upstream.start(message)
            self._task_group.start_soon(self._serve_request, message, reply, relayed, started)
            return
        if isinstance(message, JSONRPCNotification) and message.method == _INITIALIZED:
            if self._initialized_sent:
                return  # a later client's: the upstream's session has had its one
            self._initialized_sent = True
        if isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            scope = self._calls.get(request_id) if request_id is not None else None
            if scope is not None:  # a tools/call the proxy runs: stop it (and its attempt)
                scope.cancel()
                return
        try:
            await self._upstream.send(message)
        except ToolError:
            _log.warning("dropped a %s: the upstream is down", type(message).__name__)

    async def _from_upstream(self, message: JSONRPCMessage) -> None:
        """What the upstream sends unasked: notifications and its own requests."""
        changed = isinstance(message, JSONRPCNotification) and message.method == _TOOLS_CHANGED
        if changed:
            self._executor = None  # list again on the next call
        to = self._client
        listen = self._listen_of(message)
        if listen is not None:
            to = listen
        elif isinstance(message, JSONRPCNotification) and message.method == _PROGRESS:
            progress = self._attempt_progress(message)
            if progress is None:
                return
            message, to = progress, self._progress_route(message) or to
        elif to is None:
            to = self._unasked_route(message)
        if to is not None:
            await to(message)
        elif isinstance(message, JSONRPCRequest):
            error = ErrorData(code=mcp_types.METHOD_NOT_FOUND, message="no client can answer")
            await self._upstream.send(JSONRPCError(jsonrpc="2.0", id=message.id, error=error))

    def _listen_of(self, message: JSONRPCMessage) -> Reply | None:
        """The client of the ``subscriptions/listen`` a notification is stamped with."""
        if not (isinstance(message, JSONRPCNotification) and self._listens):
            return None
        meta = (message.params or {}).get("_meta")
        listen = meta.get(SUBSCRIPTION_ID_META_KEY) if isinstance(meta, Mapping) else None
        return self._listens.get(listen) if isinstance(listen, str | int) else None

    def _unasked_route(self, message: JSONRPCMessage) -> Reply | None:
        """HTTP clients (no back-channel of their own): where a message the upstream
        sent unasked goes. A change notification (list changed, resource updated) is
        about the server: to the standalone streams. Anything else sent mid-call
        belongs to a running call; the upstream does not say which: the latest (one
        call at a time is exact). Sent while no call runs: the standalone streams."""
        leg = self._running_calls[-1].leg if self._running_calls else None
        listening = self.standalone(message) if self.standalone is not None else None
        about_the_server = isinstance(message, JSONRPCNotification) and (
            message.method in LISTEN_STREAM_METHODS
        )
        if listening is not None and (leg is None or about_the_server):
            return listening
        return leg.reply if leg is not None else None

    async def _serve_request(
        self,
        request: JSONRPCRequest,
        reply: Reply,
        relayed: Pending | anyio.Event | None,
        started: int,
    ) -> None:
        params = request.params or {}
        meta = params.get("_meta")
        meta = dict(meta) if isinstance(meta, Mapping) else {}
        token = otel_context.attach(propagate.extract(meta))
        try:
            with self._tracer.start_as_current_span(
                _span_name(request),
                kind=SpanKind.SERVER,
                attributes=self._attributes(request, meta),
                start_time=started,
            ) as span:
                answer: JSONRPCMessage | None
                leg = _Leg(request.id, reply)
                if relayed is None:
                    answer = await self._tools_call(request, params, meta, span, leg)
                elif isinstance(relayed, Pending):
                    answer = await self._relay(request, relayed)
                else:
                    answer = await self._shared_handshake(request, relayed)
                if isinstance(answer, JSONRPCError):
                    span.set_attribute("error.type", str(answer.error.code))
                    span.set_status(Status(StatusCode.ERROR, answer.error.message))
                # Answered before the span ends: the client does not wait for the span's
                # processing, and the span covers the whole request, the answer sent.
                if answer is not None:
                    await leg.reply(answer)
        finally:
            otel_context.detach(token)

    def _attributes(self, request: JSONRPCRequest, meta: Mapping[str, Any]) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "mcp.method.name": request.method,
            "jsonrpc.request.id": str(request.id),
        }
        version = meta.get(mcp_types.PROTOCOL_VERSION_META_KEY) or self._upstream.protocol_version
        if isinstance(version, str):
            attributes["mcp.protocol.version"] = version
        name = (request.params or {}).get("name")
        if request.method == "tools/call" and isinstance(name, str):
            attributes["gen_ai.tool.name"] = name
            attributes["gen_ai.operation.name"] = "execute_tool"
        return attributes

    async def _relay(self, request: JSONRPCRequest, relayed: Pending) -> JSONRPCMessage | None:
        """A request the proxy does not handle (sent): the upstream's answer, as it is."""
        if request.method == _LISTEN:
            return await self._listen(request, relayed)
        try:
            answer = await self._upstream.answer(request, relayed, timeout_s=self.config.timeout_s)
            if request.method == "initialize":
                self._settle_handshake(answer)
            return answer
        except ToolError as exc:
            if request.method == "initialize":
                self._settle_handshake(None)
            code = INTERNAL_ERROR if exc.code == CLOSED else REQUEST_TIMEOUT
            error = ErrorData(code=code, message=exc.message)
        return JSONRPCError(jsonrpc="2.0", id=request.id, error=error)

    async def _listen(self, request: JSONRPCRequest, relayed: Pending) -> JSONRPCMessage | None:
        """A ``subscriptions/listen``: its answer is the end of its stream, so there is
        no timeout; the client's cancellation stops it upstream (``None``: no answer)."""
        try:
            with self._calls.get(request.id) or anyio.CancelScope() as scope:
                answer = await self._upstream.answer(request, relayed, timeout_s=None)
        except ToolError as exc:
            error = ErrorData(code=INTERNAL_ERROR, message=exc.message)
            return JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
        finally:
            self._calls.pop(request.id, None)
            self._listens.pop(request.id, None)
        return None if scope.cancelled_caught else answer

    def _settle_handshake(self, answer: JSONRPCMessage | None) -> None:
        """The first client's initialize is answered: keep the answer for the others;
        a failed one is forgotten, so the next initialize goes upstream again."""
        done = self._handshake
        if isinstance(answer, JSONRPCResponse):
            self._initialized = answer.result
        else:
            self._handshake = None
        if done is not None:
            done.set()

    async def _shared_handshake(self, request: JSONRPCRequest, done: anyio.Event) -> JSONRPCMessage:
        await done.wait()
        if self._initialized is not None:
            return JSONRPCResponse(jsonrpc="2.0", id=request.id, result=self._initialized)
        error = ErrorData(
            code=INTERNAL_ERROR, message="the upstream's initialize failed; try again"
        )
        return JSONRPCError(jsonrpc="2.0", id=request.id, error=error)

    # -- tools/call through the boundary ---------------------------------------------

    async def _tools_call(
        self,
        request: JSONRPCRequest,
        params: Mapping[str, Any],
        meta: dict[str, Any],
        span: Any,
        leg: _Leg,
    ) -> JSONRPCMessage | None:
        name = params.get("name")
        if not isinstance(name, str):
            self._calls.pop(request.id, None)
            error = ErrorData(code=mcp_types.INVALID_PARAMS, message="tools/call needs a tool name")
            return JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
        held: list[_CallState] = []
        with self._calls.get(request.id) or anyio.CancelScope() as scope:
            try:
                result = await self._execute(
                    request, name, params.get("arguments"), meta, leg, held
                )
            finally:
                self._calls.pop(request.id, None)
        if scope.cancelled_caught:
            return None  # the client cancelled: it expects no answer
        state = held[0] if held else None
        if state is not None and state.passed_error is not None and not result.ok:
            return state.passed_error.model_copy(update={"id": leg.request_id})
        upstream = state.upstream if state is not None else None
        if result.ok and upstream is not None and not (result.replayed or result.reconciled):
            body = _passed_through(upstream, result)
        else:
            body = self._answer(name, result)
            if not _envelope(meta):  # handshake era (to 2025-11-25): it has no resultType
                body.pop("resultType", None)
        if body.get("isError") is True:
            span.set_attribute("error.type", "tool_error")
        return JSONRPCResponse(jsonrpc="2.0", id=leg.request_id, result=body)

    def _answer(self, name: str, result: ToolResult) -> dict[str, Any]:
        """A result toolspan made (an error, a replay, a read-back's answer):
        toolspan's structured result, except where the tool's ``outputSchema``
        binds the structured content of a success (a client checks it): there
        the data stays, toolspan's result goes to the text and to ``_meta``."""
        answer = to_call_tool_result(result)
        if not answer.is_error and name in self._output_schemas:
            answer = answer.model_copy(
                update={
                    "structured_content": result.data,
                    "meta": {RESULT_META_KEY: _summary(result)},
                }
            )
        return answer.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def _execute(
        self,
        request: JSONRPCRequest,
        name: str,
        arguments: Any,
        meta: dict[str, Any],
        leg: _Leg,
        held: list[_CallState],
    ) -> ToolResult:
        try:
            executor = await self._executor_for(meta)
        except ToolError as exc:
            return ToolResult(
                ok=False,
                status="permanent_error",
                tool=name,
                call_id=str(request.id),
                error_code=exc.code,
                message=f"the proxy cannot call the upstream's tools: {exc.message}",
            )
        conversation = _text(meta.get(CONVERSATION_META_KEY)) or self.conversation_id
        declarations = self._declarations
        self._call_ids += 1
        call = declarations.tool_call(
            name,
            f"{self.conversation_id}-{self._call_ids}",
            arguments if arguments is not None else {},
            conversation_id=conversation,
            request_id=_text(meta.get(REQUEST_META_KEY)) or conversation,
            declaration=self._declaration(executor, name),
        )
        forwarded = {k: v for k, v in meta.items() if k not in _NOT_FORWARDED}
        state = _CallState(forwarded, request.id, conversation, leg, tool=name)
        task = (request.params or {}).get("task")
        state.task = task if isinstance(task, Mapping) else None
        held.append(state)
        state_token = _CALL.set(state)
        self._running_calls.append(state)
        try:
            return await executor.execute(call)
        finally:
            self._running_calls.remove(state)
            _CALL.reset(state_token)

    def _declaration(self, executor: AsyncExecutor, name: str) -> Declaration | None:
        """The key-deriving declaration: the config's, else opted-in hints (no key)."""
        if name in self.config.tools:
            return None  # Declarations finds it by name
        listed = executor.tools.get(name)
        if listed is None:
            return None
        return Declaration(side_effect=listed.side_effect, idempotent=listed.idempotent)

    async def _executor_for(self, meta: Mapping[str, Any]) -> AsyncExecutor:
        if self._executor is not None:  # listed: no lock, whose acquiring yields to the loop
            return self._executor
        async with self._listing:
            if self._executor is None:
                listed = await self._list_tools(meta)
                self._task_support = {
                    t.name: t.execution.task_support
                    for t in listed
                    if t.execution is not None and t.execution.task_support is not None
                }
                self._output_schemas = {
                    t.name: t.output_schema for t in listed if t.output_schema is not None
                }
                self._executor = self._build_executor(listed)
            return self._executor

    def _build_executor(self, listed: list[mcp_types.Tool]) -> AsyncExecutor:
        try:
            return AsyncExecutor(
                [self._tool(t) for t in listed],
                tracer_provider=self._tracer_provider,
                safeguards=Safeguards(
                    store=self._store,
                    loop_threshold=self.config.loop_threshold,
                    max_attempts_per_action=self.config.max_attempts_per_action,
                    guard_reads=self.config.guard_reads,
                    unguarded_tools=self._annotated_reads(listed),
                ),
                retry_budget=self._budget,
                circuit_breaker=self._breaker,
                **self._executor_options,
            )
        except ConfigurationError as exc:  # the config names a tool the upstream lacks
            raise ToolError("proxy_misconfigured", str(exc)) from exc

    def _annotated_reads(self, listed: list[mcp_types.Tool]) -> frozenset[str]:
        """Undeclared tools the server calls read-only. Untrusted, they are not
        retried; but polling one is no loop, so the guards skip them."""
        return frozenset(
            t.name
            for t in listed
            if t.name not in self.config.tools
            and t.annotations is not None
            and t.annotations.read_only_hint is True
        )

    async def _list_tools(self, meta: Mapping[str, Any]) -> list[mcp_types.Tool]:
        envelope = _envelope(meta)
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {}
            if envelope:
                params["_meta"] = envelope
            if cursor is not None:
                params["cursor"] = cursor
            page = mcp_types.ListToolsResult.model_validate(
                await self._ask("tools/list", params or None)
            )
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return listed

    def _tool(self, listed: mcp_types.Tool) -> Tool:
        config = self.config
        hinted = declaration_from_annotations(listed) if config.trust_annotations else None
        declarations = self._declarations
        declaration = declarations.with_fallback(listed.name, hinted)
        options: dict[str, Any] = {
            "declaration": declaration,
            "span_attributes": {"mcp.method.name": "tools/call"},
            "key_passed": KEY_PASSED,
        }
        try:
            tool = declarations.tool(
                listed.name,
                self._caller(listed.name),
                parameters=listed.input_schema,
                description=listed.description or "",
                **options,
            )
        except ValueError:  # the server's inputSchema is not a valid JSON Schema
            tool = declarations.tool(
                listed.name, self._caller(listed.name), parameters={"type": "object"}, **options
            )
        read_back = None
        commit_window_s = tool.commit_window_s
        if config.runs_as_task(listed.name) and tool.is_write and not tool.idempotent:
            read_back = self._task_read_back(listed.name)
            # The upstream's task record settles the outcome, pending or not: no
            # late commit hides behind its answer, so there is no window to wait out.
            commit_window_s = 0.0
        return dataclasses.replace(
            tool,
            check_with=config.check_with(listed.name),
            service=self.service,
            read_back=read_back,
            commit_window_s=commit_window_s,
            # The proxy gives an upstream call up after this: its key's lease covers it.
            attempt_timeout_s=max(config.timeout_s, config.startup_timeout_s),
        )

    def _caller(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def call(**arguments: Any) -> Any:
            state = _CALL.get()
            meta: dict[str, Any] = dict(state.meta) if state is not None else {}
            propagate.inject(meta)  # the attempt span's trace context
            current = current_call()
            if current is not None and current.idempotency_key:
                meta[IDEMPOTENCY_META_KEY] = current.idempotency_key
            params: dict[str, Any] = {"name": name, "arguments": arguments, "_meta": meta}
            with self._own_progress(meta, state):
                return await self._attempt(name, arguments, params, state)

        call.__name__ = name
        return call

    async def _attempt(
        self, name: str, arguments: Any, params: dict[str, Any], state: _CallState | None
    ) -> Any:
        """One upstream ``tools/call`` (a task's, awaited; input asked for, relayed)."""
        meta = params["_meta"]
        asked = state.task if state is not None else None
        if not self._as_task(name, asked, bool(_envelope(meta))):
            answer = await self._ask("tools/call", params, state)
            while is_input_required(answer) and state is not None and state.leg is not None:
                answer = await self._input_round(state, params, answer)
            return self._data(_kept(state, name, answer))
        params["task"] = dict(asked) if asked is not None else {"ttl": TASK_TTL_MS}
        answer = await self._ask("tools/call", params)
        task_id = task_id_of(answer)
        if task_id is None:  # the server ran it as a plain call
            return self._data(_kept(state, name, answer))
        if state is not None:
            self._tasks.note(state.conversation, name, arguments, task_id)
        final = await await_task(
            self._ask, task_id, _envelope(meta), self._poll_sleep, self._with_input(state)
        )
        return self._data(_kept(state, name, final))

    def _with_input(self, state: _CallState | None) -> FetchWithInput | None:
        """How a task waiting for input is fetched: its ``tasks/result``, the server's
        questions relayed to this call's client (``None``: no client to ask)."""
        if state is None or state.leg is None:
            return None

        async def fetch(params: dict[str, Any]) -> dict[str, Any]:
            # The handshake era's server asks with its own requests on this
            # tasks/result (relayed as any mid-call request); 2026-07-28's answers
            # it with an InputRequiredResult, relayed as a tools/call's is.
            timeout_s = self.config.input_timeout_s
            answer = await self._ask("tasks/result", params, state, timeout_s=timeout_s)
            while is_input_required(answer) and state.leg is not None:
                answer = await self._input_round(state, params, answer, "tasks/result")
            return answer

        return fetch

    def _as_task(self, name: str, asked: Mapping[str, Any] | None, modern: bool) -> bool:
        """Run as a task: the config says so, the tool requires it, or the client
        asked for one (its ``task``, forwarded) of a tool that offers it. A
        2026-07-28 listing has no ``execution`` (tasks are an extension there):
        the client's asking is what says the server runs tasks."""
        support = self._task_support.get(name)
        if self.config.runs_as_task(name) or support == "required":
            return True
        if asked is None:
            return False
        return support == "optional" or (support is None and modern)

    @contextlib.contextmanager
    def _own_progress(self, meta: dict[str, Any], state: _CallState | None) -> Iterator[None]:
        """While one attempt runs, its progress comes under a token of its own."""
        token = meta.get("progressToken")
        if token is None:
            yield
            return
        self._progress_ids += 1
        own = f"{_PROGRESS_PREFIX}{self._progress_ids}"
        meta["progressToken"] = own
        self._progress[own] = (token, state)
        try:
            yield
        finally:
            del self._progress[own]

    def _progress_route(self, message: JSONRPCNotification) -> Reply | None:
        """The reply of the call whose attempt this progress is of (``None``: unknown)."""
        entry = self._progress.get(str((message.params or {}).get("progressToken")))
        state = entry[1] if entry is not None else None
        return state.leg.reply if state is not None and state.leg is not None else None

    def _attempt_progress(self, message: JSONRPCNotification) -> JSONRPCNotification | None:
        """Progress under an attempt's token, with the client's token back (``None``:
        the attempt is over, the client is told nothing more of it)."""
        params = message.params or {}
        token = params.get("progressToken")
        if not (isinstance(token, str) and token.startswith(_PROGRESS_PREFIX)):
            return message  # a relayed request's progress: the client's own token
        if token not in self._progress:
            return None
        update = {"params": {**params, "progressToken": self._progress[token][0]}}
        return message.model_copy(update=update)

    async def _input_round(
        self,
        state: _CallState,
        params: dict[str, Any],
        asked: dict[str, Any],
        method: str = "tools/call",
    ) -> dict[str, Any]:
        """The upstream asked for input (2026-07-28 multi-round-trip): hand its
        ``InputRequiredResult`` to the client as the answer to this leg, wait
        (within this attempt) for the client's retry carrying the responses, and
        send those upstream with the upstream's own ``requestState``."""
        assert state.leg is not None
        token = f"toolspan-input-{secrets.token_hex(12)}"
        waiting = self._awaiting_input[token] = _AwaitingInput()
        interim = {**asked, "requestState": token}
        try:
            await state.leg.reply(
                JSONRPCResponse(jsonrpc="2.0", id=state.leg.request_id, result=interim)
            )
            with anyio.move_on_after(self.config.input_timeout_s):
                await waiting.done.wait()
        finally:
            self._awaiting_input.pop(token, None)
        if waiting.leg is None:
            raise ToolError(
                "mcp_input_required",
                "the client did not answer the input the MCP server asked for within "
                f"{self.config.input_timeout_s:g}s",
            )
        # The same leg, moved on: the call's final answer goes to the client's retry.
        state.leg.request_id, state.leg.reply = waiting.leg.request_id, waiting.leg.reply
        again = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        if "inputResponses" in waiting.params:
            again["inputResponses"] = waiting.params["inputResponses"]
        if asked.get("requestState") is not None:
            again["requestState"] = asked["requestState"]
        # A task's tasks/result answers once the task ended: it may take the input's time.
        timeout_s = self.config.input_timeout_s if method == "tasks/result" else None
        return await self._ask(method, again, state, timeout_s=timeout_s)

    def _resumed(self, message: JSONRPCRequest, reply: Reply) -> bool:
        """A ``tools/call`` echoing the requestState of a call waiting for input."""
        token = (message.params or {}).get("requestState")
        waiting = self._awaiting_input.get(token) if isinstance(token, str) else None
        if waiting is None or waiting.leg is not None:
            return False
        waiting.params = message.params or {}
        waiting.leg = _Leg(message.id, reply)
        waiting.done.set()
        return True

    def _task_read_back(self, name: str) -> Callable[..., Awaitable[Any]]:
        """Did the write happen? Its task says: read it again (never the write)."""

        async def read_back(**arguments: Any) -> Any:
            state = _CALL.get()
            task_id = None
            if state is not None:
                task_id = self._tasks.find(state.conversation, name, arguments)
            if state is None or task_id is None:
                raise ToolError("unknown_outcome", "no upstream task of this call is known")
            return self._data(
                await await_task(self._ask, task_id, _envelope(state.meta), self._poll_sleep)
            )

        return read_back

    def _data(self, answer: dict[str, Any]) -> Any:
        """A ``CallToolResult``'s data (as ``mcp.py`` maps it), or its error, classified."""
        if answer.get("isError") is not True and "content" in answer:
            # The success path reads the wire dict: no model to build per call.
            if answer.get("structuredContent") is not None:
                return answer["structuredContent"]
            text = _single_text(answer["content"])
            if text is not None:
                return text
        result = mcp_types.CallToolResult.model_validate(answer)
        if result.is_error:
            raise self._tool_error(result)
        return result_data(result)

    def _tool_error(self, result: mcp_types.CallToolResult) -> ToolError:
        """An ``isError`` result, classified by the fields the config names."""
        content = result.structured_content if isinstance(result.structured_content, dict) else {}
        field = self.config.error_code_field
        code = content.get(field) if field else None
        after = (
            content.get(self.config.retry_after_field) if self.config.retry_after_field else None
        )
        return ToolError(
            str(code) if code else "mcp_tool_error",
            result_text(result) or "the MCP tool reported an error",
            retry_after_s=parse_retry_after(after, now=time.time()),
        )

    async def _ask(
        self,
        method: str,
        params: dict[str, Any] | None,
        state: _CallState | None = None,
        *,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """One request of the proxy's own; its result, or a classified :class:`ToolError`
        (an error the client must see as it is kept in ``state`` too)."""
        # Absent params are left out, never sent as null: servers on the
        # TypeScript SDK drop a request whose params are null, unanswered.
        fields: dict[str, Any] = {} if params is None else {"params": params}
        request = JSONRPCRequest(
            jsonrpc="2.0", id=self._upstream.next_id(), method=method, **fields
        )
        timeout_s = self.config.timeout_s if timeout_s is None else timeout_s
        answer = await self._upstream.request(request, timeout_s=timeout_s)
        if isinstance(answer, JSONRPCError):
            error = answer.error
            if state is not None and error.code in _PASSED_ERRORS:
                state.passed_error = answer
            mapped = error_code_for(MCPError(error.code, error.message, error.data))
            assert mapped is not None  # every MCPError maps
            raise mapped
        return answer.result


class _Running:
    """``async with proxy.running()``: the proxy's task group for its requests and upstream."""

    def __init__(self, proxy: McpProxy) -> None:
        self._proxy = proxy
        self._group = anyio.create_task_group()

    async def __aenter__(self) -> McpProxy:
        group = await self._group.__aenter__()
        self._proxy._task_group = group
        await self._proxy._upstream.run(group)
        return self._proxy

    async def __aexit__(self, *exc: Any) -> bool | None:
        self._group.cancel_scope.cancel()
        return await self._group.__aexit__(*exc)


def _kept(state: _CallState | None, tool: str, answer: dict[str, Any]) -> dict[str, Any]:
    """Keep the call's own tool's answer (a read-back's answer is another tool's)."""
    if state is not None and state.tool == tool:
        state.upstream = answer
    return answer


def _summary(result: ToolResult) -> dict[str, Any]:
    """toolspan's result without the data: what ``_meta`` carries beside it."""
    return {k: v for k, v in result.to_dict().items() if k != "data"}


def _passed_through(upstream: dict[str, Any], result: ToolResult) -> dict[str, Any]:
    """The upstream's ``CallToolResult`` as it came, toolspan's status added to its
    ``_meta`` under :data:`RESULT_META_KEY` (the upstream's own ``_meta`` kept)."""
    meta = upstream.get("_meta")
    merged = {**meta} if isinstance(meta, dict) else {}
    merged[RESULT_META_KEY] = _summary(result)
    return {**upstream, "_meta": merged}


def _single_text(blocks: Any) -> str | None:
    """The text of a content list that is one text block (else ``None``)."""
    if not (isinstance(blocks, list) and len(blocks) == 1 and isinstance(blocks[0], dict)):
        return None
    text = blocks[0].get("text")
    return text if blocks[0].get("type") == "text" and isinstance(text, str) else None


def _envelope(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The 2026-07-28 per-request fields of a client's ``_meta`` (empty for the handshake era)."""
    return {k: meta[k] for k in _ENVELOPE if k in meta}


def _span_name(request: JSONRPCRequest) -> str:
    """``{mcp.method.name} {target}`` (the tool, prompt or resource), as the conventions say."""
    params = request.params or {}
    target = params.get("name") or params.get("uri")
    return f"{request.method} {target}" if isinstance(target, str) else request.method


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
