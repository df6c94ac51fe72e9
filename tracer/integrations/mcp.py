"""The retry boundary for MCP: ``call_tool`` on a client session, through the executor.

Extra ``toolspan[mcp]`` (the ``mcp`` 2.x SDK)::

    from toolspan.tracer.integrations.mcp import GuardedSession

    async with mcp.Client(server) as client:            # or any ClientSession
        guarded = await GuardedSession.open(
            client.session,
            lambda tools: AsyncExecutor(tools, safeguards=Safeguards(store=store)),
            declarations=declarations,
            conversation_id=cid,
        )
        result = await guarded.call_tool("refund_order", {"order_id": "A-1"},
                                         request_id=rid, call_id=call_id)

The tools are declared from the server's ``tools/list`` (``inputSchema`` is
the JSON Schema the executor checks, the description is the server's);
retry safety comes from the application's :class:`Declarations`. The
server's ``readOnlyHint``/``idempotentHint`` annotations come from a server
that may not be trusted, so they are used only with ``trust_annotations=True``
(and only for tools the application did not declare); otherwise an
undeclared MCP tool is a write that is never repeated blind.

Failures are classified for the retry policy: a request timeout is
``timeout`` (every request waits ``timeout_s``, by default
:data:`DEFAULT_TIMEOUT_S`, 30 s), a closed or broken connection
``connection_error``, a JSON-RPC error ``jsonrpc_<name>`` (``jsonrpc_invalid_params``,
``jsonrpc_internal_error``, ... or ``jsonrpc_<code>``), a result the protocol does
not allow ``mcp_invalid_result``, and a result with ``isError`` ``mcp_tool_error``
(or what ``classify`` says). A server asking for input mid-call (2026-07-28
``InputRequiredResult``) gets it from the session's own callbacks
(elicitation, sampling, roots), within the attempt, and the call goes on as
``mcp.Client`` drives it; one that asks nothing (only ``requestState``), or
asks more than 10 times (``MAX_INPUT_ROUNDS``), ends the call as
``mcp_input_required``.

The server is a peer that may not be trusted: its error texts are capped like
results (the executor's ``max_result_bytes``), a ``tools/list`` that repeats a
cursor or pages past :data:`MAX_LIST_PAGES` is refused (``ConfigurationError``),
and ``$ref`` in its schemas is resolved only inside the schema (never a URL or file).
Structured content is the call's ``data``; without it, the text of a single
text block, else the content blocks as JSON.

Every span of a call carries ``mcp.method.name = "tools/call"`` and, when
known, ``mcp.session.id``; the trace context goes to the server in
``params._meta`` (OTel MCP semantic conventions), with the call's
idempotency key as ``toolspan/idempotency-key`` so a server can deduplicate.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import anyio
import mcp_types
from mcp import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from opentelemetry import propagate
from pydantic import ValidationError

from .._errors import ConfigurationError, ToolError
from .._executor import AsyncExecutor, current_call
from .._fleetcheck import check_number
from .._result import ToolResult
from .._tool import Tool
from ._common import Declaration, Declarations, model_reply

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "IDEMPOTENCY_META_KEY",
    "MAX_LIST_PAGES",
    "GuardedSession",
    "declaration_from_annotations",
    "error_code_for",
    "mcp_tools",
]

IDEMPOTENCY_META_KEY = "toolspan/idempotency-key"
# How long one request waits for the server when the caller names no timeout:
# a server that never answers must not hold the agent for ever.
DEFAULT_TIMEOUT_S = 30.0
# A tools/list longer than this is a server paging without end.
MAX_LIST_PAGES = 100
# Rounds of input one call may ask for (the SDK's Client and the TypeScript SDK allow 10).
MAX_INPUT_ROUNDS = 10

_JSONRPC_NAMES = {
    mcp_types.PARSE_ERROR: "parse_error",
    mcp_types.INVALID_REQUEST: "invalid_request",
    mcp_types.METHOD_NOT_FOUND: "method_not_found",
    mcp_types.INVALID_PARAMS: "invalid_params",
    mcp_types.INTERNAL_ERROR: "internal_error",
}
# Transport failures: the request may or may not have reached the server.
_BROKEN = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)

Classify = Callable[[mcp_types.CallToolResult], str]


def error_code_for(exc: BaseException) -> ToolError | None:
    """An MCP or transport failure as a classified :class:`ToolError` (``None``: not one)."""
    if isinstance(exc, ValidationError):
        # Where, not what: the server's values may be anything, and large.
        where = ", ".join(".".join(map(str, e["loc"]))[:60] for e in exc.errors()[:3])
        return ToolError(
            "mcp_invalid_result",
            f"the MCP server's result is malformed ({exc.error_count()} problem(s), at {where})",
        )
    if isinstance(exc, MCPError):
        if exc.code == mcp_types.REQUEST_TIMEOUT:
            return ToolError("timeout", f"MCP request timed out: {exc.message}")
        if exc.code == mcp_types.CONNECTION_CLOSED:
            return ToolError("connection_error", f"MCP connection closed: {exc.message}")
        name = _JSONRPC_NAMES.get(exc.code, str(exc.code))
        return ToolError(f"jsonrpc_{name}", f"MCP error {exc.code}: {exc.message}")
    if isinstance(exc, _BROKEN):
        return ToolError("connection_error", f"MCP transport failed: {type(exc).__name__}")
    return None


def declaration_from_annotations(tool: mcp_types.Tool) -> Declaration | None:
    """What a server's hints claim (use only for servers you trust); ``None`` without hints."""
    hints = tool.annotations
    if hints is None:
        return None
    if hints.read_only_hint:
        return Declaration.read()
    if hints.idempotent_hint:
        return Declaration.write(idempotent=True)
    return None


async def mcp_tools(
    session: ClientSession,
    declarations: Declarations | Mapping[str, Declaration] | None = None,
    *,
    trust_annotations: bool = False,
    timeout_s: float | None = None,
    session_id: str | None = None,
    classify: Classify | None = None,
) -> list[Tool]:
    """toolspan tools for every tool the server lists (all pages), calling it through ``session``.

    ``timeout_s`` bounds each attempt (an MCP request timeout, classified
    ``timeout``) and each page of the listing; ``None`` is
    :data:`DEFAULT_TIMEOUT_S`. ``session_id`` is the transport's session id
    when it has one (Streamable HTTP); ``classify`` names the error code of an
    ``isError`` result (default ``mcp_tool_error``, not retried).
    """
    timeout_s = _timeout(timeout_s)
    declared = Declarations.of(declarations)
    attributes: dict[str, str] = {"mcp.method.name": "tools/call"}
    if session_id:
        attributes["mcp.session.id"] = session_id
    tools = []
    for listed in await _list_all(session, timeout_s):
        hinted = declaration_from_annotations(listed) if trust_annotations else None
        tools.append(
            declared.tool(
                listed.name,
                _caller(session, listed.name, timeout_s, classify or _tool_error_code),
                parameters=listed.input_schema,
                description=listed.description or "",
                declaration=declared.with_fallback(listed.name, hinted),
                span_attributes=attributes,
                key_passed=f"MCP _meta {IDEMPOTENCY_META_KEY}",
            )
        )
    return tools


class GuardedSession:
    """A client session whose ``call_tool`` runs through the retry boundary.

    Build it with :meth:`open` (lists the tools, hands them to your executor
    factory). :meth:`call_tool` answers like ``ClientSession.call_tool``: a
    ``CallToolResult``, ``isError`` on every failure, toolspan's structured
    result as its structured content and text. :meth:`execute` returns the
    :class:`ToolResult` itself.
    """

    def __init__(
        self,
        session: ClientSession,
        executor: AsyncExecutor,
        *,
        conversation_id: str,
        declarations: Declarations | Mapping[str, Declaration] | None = None,
        hinted: Mapping[str, Declaration] | None = None,
        session_id: str | None = None,
    ) -> None:
        self.session = session
        self.executor = executor
        self.conversation_id = conversation_id
        self.declarations = Declarations.of(declarations)
        self.session_id = session_id
        self._hinted = dict(hinted or {})
        # Call ids when the caller has none (MCP has no model call id): unique, readable.
        self._prefix = f"mcp_{secrets.token_hex(4)}"
        self._ids = itertools.count(1)

    @classmethod
    async def open(
        cls,
        session: ClientSession,
        make_executor: Callable[[list[Tool]], AsyncExecutor],
        *,
        conversation_id: str,
        declarations: Declarations | Mapping[str, Declaration] | None = None,
        trust_annotations: bool = False,
        timeout_s: float | None = None,
        session_id: str | None = None,
        classify: Classify | None = None,
    ) -> GuardedSession:
        """List the server's tools, build the executor over them, wrap the session."""
        declared = Declarations.of(declarations)
        tools = await mcp_tools(
            session,
            declared,
            trust_annotations=trust_annotations,
            timeout_s=timeout_s,
            session_id=session_id,
            classify=classify,
        )
        hinted = {}
        if trust_annotations:
            hinted = {t.name: _as_declaration(t) for t in tools if t.name not in declared}
        return cls(
            session,
            make_executor(tools),
            conversation_id=conversation_id,
            declarations=declared,
            hinted=hinted,
            session_id=session_id,
        )

    @property
    def tools(self) -> Iterable[Tool]:
        return self.executor.tools.values()

    async def execute(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        call_id: str | None = None,
        request_id: str = "",
        turn_id: str = "",
    ) -> ToolResult:
        """Run one ``tools/call`` through the boundary; the structured result."""
        call = self.declarations.tool_call(
            name,
            call_id or f"{self._prefix}_{next(self._ids)}",
            arguments if arguments is not None else {},
            conversation_id=self.conversation_id,
            request_id=request_id,
            turn_id=turn_id,
            declaration=self._hinted.get(name),
        )
        return await self.executor.execute(call)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        call_id: str | None = None,
        request_id: str = "",
        turn_id: str = "",
    ) -> mcp_types.CallToolResult:
        """``ClientSession.call_tool`` behind the boundary: failures are ``isError`` results."""
        result = await self.execute(
            name, arguments, call_id=call_id, request_id=request_id, turn_id=turn_id
        )
        return to_call_tool_result(result)


def to_call_tool_result(result: ToolResult) -> mcp_types.CallToolResult:
    """A :class:`ToolResult` as MCP's native result (``isError`` on failures)."""
    reply = model_reply(result)
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=reply.text)],
        structured_content=reply.payload,
        is_error=reply.is_error,
    )


def _as_declaration(tool: Tool) -> Declaration:
    return Declaration(
        side_effect=tool.side_effect, idempotent=tool.idempotent, key_passed=tool.key_passed
    )


def _timeout(timeout_s: float | None) -> float:
    if timeout_s is None:
        return DEFAULT_TIMEOUT_S
    return check_number("MCP", "timeout_s", timeout_s, positive=True)


async def _list_all(session: ClientSession, timeout_s: float) -> list[mcp_types.Tool]:
    listed: list[mcp_types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        params = None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
        with anyio.fail_after(timeout_s):
            page = await session.list_tools(params=params)
        listed.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return listed
        if cursor in seen:
            raise ConfigurationError(
                f"the MCP server's tools/list repeats a page cursor after {len(seen) + 1} page(s)"
            )
        seen.add(cursor)
    raise ConfigurationError(
        f"the MCP server's tools/list goes on past {MAX_LIST_PAGES} pages: tools not declared"
    )


def _caller(
    session: ClientSession, name: str, timeout_s: float | None, classify: Classify
) -> Callable[..., Any]:
    async def call(**arguments: Any) -> Any:
        meta: dict[str, Any] = {}
        propagate.inject(meta)  # W3C trace context of the current attempt span
        current = current_call()
        if current is not None and current.idempotency_key:
            meta[IDEMPOTENCY_META_KEY] = current.idempotency_key
        asked: mcp_types.InputRequiredResult | None = None
        for _ in range(MAX_INPUT_ROUNDS + 1):
            result = await _call_once(session, name, arguments, timeout_s, meta, asked)
            if not isinstance(result, mcp_types.InputRequiredResult):
                break
            if not result.input_requests:  # nothing the client's callbacks could answer
                raise ToolError(
                    "mcp_input_required", "the MCP server asked for input for this call"
                )
            asked = result
        else:
            raise ToolError(
                "mcp_input_required",
                f"the MCP server asked for input more than {MAX_INPUT_ROUNDS} times in one call",
            )
        if result.is_error:
            raise ToolError(classify(result), _text(result) or "the MCP tool reported an error")
        return _data(result)

    call.__name__ = name
    return call


async def _call_once(
    session: ClientSession,
    name: str,
    arguments: dict[str, Any],
    timeout_s: float | None,
    meta: dict[str, Any],
    asked: mcp_types.InputRequiredResult | None,
) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
    """One ``tools/call``; after ``asked``, the retry carrying the client's answers."""
    try:
        responses = None if asked is None else await _answer_inputs(session, asked)
        return await session.call_tool(
            name,
            arguments,
            read_timeout_seconds=timeout_s,
            meta=cast(mcp_types.RequestParamsMeta, meta),  # an open map of extra keys
            input_responses=responses,
            request_state=None if asked is None else asked.request_state,
            allow_input_required=True,
        )
    except Exception as exc:
        mapped = error_code_for(exc)
        if mapped is None:
            raise
        raise mapped from exc


async def _answer_inputs(
    session: ClientSession, asked: mcp_types.InputRequiredResult
) -> dict[str, mcp_types.InputResponse]:
    """The session's callbacks answer each input request (a refusal ends the call)."""
    responses: dict[str, mcp_types.InputResponse] = {}
    for key, request in (asked.input_requests or {}).items():
        params = request.params
        context = ClientRequestContext(
            session=session, request_id=key, meta=params.meta if params else None
        )
        answer = await session.dispatch_input_request(context, request)
        if isinstance(answer, mcp_types.ErrorData):
            raise ToolError(
                "mcp_input_refused",
                f"the client did not give the input asked for: {answer.message}",
            )
        responses[key] = answer
    return responses


def _tool_error_code(_result: mcp_types.CallToolResult) -> str:
    return "mcp_tool_error"


def _text(result: mcp_types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, mcp_types.TextContent))


def _data(result: mcp_types.CallToolResult) -> Any:
    if result.structured_content is not None:
        return result.structured_content
    blocks = result.content
    if len(blocks) == 1 and isinstance(blocks[0], mcp_types.TextContent):
        return blocks[0].text
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]
