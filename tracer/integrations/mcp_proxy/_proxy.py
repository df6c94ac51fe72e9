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

import contextvars
import dataclasses
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
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
from ._tasks import TaskBook, await_task, task_id_of
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
TASK_TTL_MS = 3_600_000
# How an idempotent write's key reaches the upstream (each attempt's ``_meta``).
KEY_PASSED = (
    f"MCP _meta {IDEMPOTENCY_META_KEY}"  # how long the upstream keeps a task the proxy started
)

_log = logging.getLogger("toolspan.mcp_proxy")

Reply = Callable[[JSONRPCMessage], Awaitable[None]]


@dataclass
class _CallState:
    """What one ``tools/call`` carries to its attempts (read by the tool functions)."""

    meta: dict[str, Any]
    request_id: RequestId
    conversation: str


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
        self._declarations = self.config.declarations()
        self._tasks = TaskBook()
        self._listing = anyio.Lock()
        self._client: Reply | None = None  # where unasked upstream messages go (stdio)
        self._calls: dict[RequestId, anyio.CancelScope] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._call_ids = 0

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
            relayed = None
            started = time.time_ns()
            if message.method == "tools/call":
                # Its cancellation may come before its task starts: the scope waits for it.
                self._calls[message.id] = anyio.CancelScope()
            else:
                # Sent here, in the order the client sent it (a notification after it,
                # such as its cancellation, must not overtake it); awaited in its task.
                relayed = await self._upstream.start(message)
            self._task_group.start_soon(self._serve_request, message, reply, relayed, started)
            return
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
        if self._client is not None:
            await self._client(message)
        elif isinstance(message, JSONRPCRequest):  # no back-channel (HTTP clients)
            error = ErrorData(code=mcp_types.METHOD_NOT_FOUND, message="no client can answer")
            await self._upstream.send(JSONRPCError(jsonrpc="2.0", id=message.id, error=error))

    async def _serve_request(
        self, request: JSONRPCRequest, reply: Reply, relayed: Pending | None, started: int
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
                if relayed is None:
                    answer = await self._tools_call(request, params, meta, span)
                else:
                    answer = await self._relay(request, relayed)
                if isinstance(answer, JSONRPCError):
                    span.set_attribute("error.type", str(answer.error.code))
                    span.set_status(Status(StatusCode.ERROR, answer.error.message))
                # Answered before the span ends: the client does not wait for the span's
                # processing, and the span covers the whole request, the answer sent.
                if answer is not None:
                    await reply(answer)
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

    async def _relay(self, request: JSONRPCRequest, relayed: Pending) -> JSONRPCMessage:
        """A request the proxy does not handle (sent): the upstream's answer, as it is."""
        try:
            return await self._upstream.answer(request, relayed, timeout_s=self.config.timeout_s)
        except ToolError as exc:
            code = INTERNAL_ERROR if exc.code == CLOSED else REQUEST_TIMEOUT
            error = ErrorData(code=code, message=exc.message)
        return JSONRPCError(jsonrpc="2.0", id=request.id, error=error)

    # -- tools/call through the boundary ---------------------------------------------

    async def _tools_call(
        self, request: JSONRPCRequest, params: Mapping[str, Any], meta: dict[str, Any], span: Any
    ) -> JSONRPCMessage | None:
        name = params.get("name")
        if not isinstance(name, str):
            self._calls.pop(request.id, None)
            error = ErrorData(code=mcp_types.INVALID_PARAMS, message="tools/call needs a tool name")
            return JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
        with self._calls.get(request.id) or anyio.CancelScope() as scope:
            try:
                result = await self._execute(request, name, params.get("arguments"), meta)
            finally:
                self._calls.pop(request.id, None)
        if scope.cancelled_caught:
            return None  # the client cancelled: it expects no answer
        answer = self._answer(name, result)
        if answer.is_error:
            span.set_attribute("error.type", "tool_error")
        body = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
        return JSONRPCResponse(jsonrpc="2.0", id=request.id, result=body)

    def _answer(self, name: str, result: ToolResult) -> mcp_types.CallToolResult:
        """MCP's result: toolspan's structured result, except where the tool's
        ``outputSchema`` binds the structured content of a success (a client
        checks it): there the upstream's data stays, toolspan's result goes to
        the text and to ``_meta`` under :data:`RESULT_META_KEY`."""
        answer = to_call_tool_result(result)
        if answer.is_error or name not in self._output_schemas:
            return answer
        summary = {k: v for k, v in (answer.structured_content or {}).items() if k != "data"}
        return answer.model_copy(
            update={"structured_content": result.data, "meta": {RESULT_META_KEY: summary}}
        )

    async def _execute(
        self, request: JSONRPCRequest, name: str, arguments: Any, meta: dict[str, Any]
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
        state_token = _CALL.set(_CallState(forwarded, request.id, conversation))
        try:
            return await executor.execute(call)
        finally:
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
                ),
                retry_budget=self._budget,
                circuit_breaker=self._breaker,
                **self._executor_options,
            )
        except ConfigurationError as exc:  # the config names a tool the upstream lacks
            raise ToolError("proxy_misconfigured", str(exc)) from exc

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
            if not self.config.runs_as_task(name):
                return self._data(await self._ask("tools/call", params))
            params["task"] = {"ttl": TASK_TTL_MS}
            answer = await self._ask("tools/call", params)
            task_id = task_id_of(answer)
            if task_id is None:  # the server ran it as a plain call
                return self._data(answer)
            if state is not None:
                self._tasks.note(state.conversation, name, arguments, task_id)
            return self._data(
                await await_task(self._ask, task_id, _envelope(meta), self._poll_sleep)
            )

        call.__name__ = name
        return call

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

    async def _ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """One request of the proxy's own; its result, or a classified :class:`ToolError`."""
        request = JSONRPCRequest(
            jsonrpc="2.0", id=self._upstream.next_id(), method=method, params=params
        )
        answer = await self._upstream.request(request, timeout_s=self.config.timeout_s)
        if isinstance(answer, JSONRPCError):
            error = answer.error
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
