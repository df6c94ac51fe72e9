"""The retry boundary inside LangChain v1 agents and LangGraph (extra ``toolspan[langchain]``).

:class:`RetryBoundaryMiddleware` is an agent middleware (``wrap_tool_call``
and ``awrap_tool_call``) that runs every tool call through a toolspan
executor; :func:`guarded_tool_node` is LangGraph's ``ToolNode`` with the same
boundary, for graphs built by hand::

    from toolspan.tracer.integrations import Declaration, Declarations
    from toolspan.tracer.integrations.langchain import RetryBoundaryMiddleware

    boundary = RetryBoundaryMiddleware(Declarations({
        "get_order": Declaration.read(),
        "refund_order": Declaration.write(idempotent=True, resource_key=by_order,
                                          key_passed="Idempotency-Key header"),
    }), safeguards=Safeguards(store=store), tracer_provider=provider)
    agent = create_agent(model, tools=[get_order, refund_order], middleware=[boundary])
    agent.invoke({"messages": [...]},
                 {"configurable": {"thread_id": conversation_id, "request_id": request_id}})

Unlike LangChain's ``ToolRetryMiddleware``, which repeats any tool that
raised, the boundary repeats a write only under an idempotency key its
service honours, settles a lost response by read-back or replay, and never
retries a write blind. Name, JSON Schema and description come from the
``BaseTool``; the rest from the application's :class:`Declarations`.

Ids: the conversation is the ``thread_id`` and the request the
``request_id`` of the run's ``configurable`` (or ``conversation_id=`` /
``request_id=``, functions of the ``ToolCallRequest``); the turn is the
number of AI messages so far. Without a request id no key can be derived,
so no write is ever repeated.

Each attempt calls the next handler (the tool, through the rest of the
middleware). A tool that raised is classified by the executor; a tool that
answered with an error ``ToolMessage`` failed for good (``tool_error``, not
repeated). A failure reaches the model as a ``ToolMessage`` with
``status="error"`` whose content is the structured result as JSON (the same
object is its ``artifact``); the run goes on. A success keeps the tool's own
message; a replayed or read-back answer becomes a new one. An interrupt
(``interrupt()`` in a tool, human-in-the-loop) ends the attempt as
``control_flow`` (never repeated; a write's key is released) and then
propagates as LangGraph expects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from langchain.agents.middleware import AgentMiddleware, ToolCallRequest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from .._errors import ToolError
from .._executor import AsyncExecutor, Executor
from .._result import ToolResult
from ._common import Declaration, Declarations, model_reply
from ._frameworks import Bridge, hand_over, running, shared_guards

__all__ = ["IdOf", "RetryBoundaryMiddleware", "guarded_tool_node"]

# A run id read from the tool call request: the conversation or the request.
IdOf = Callable[[ToolCallRequest], str | None]
Reply = ToolMessage | Command[Any]


def _configurable(request: ToolCallRequest, key: str) -> str | None:
    config = request.runtime.config if request.runtime is not None else None
    value = ((config or {}).get("configurable") or {}).get(key)
    return None if value is None else str(value)


def _thread_id(request: ToolCallRequest) -> str | None:
    return _configurable(request, "thread_id")


def _request_id(request: ToolCallRequest) -> str | None:
    return _configurable(request, "request_id")


class RetryBoundaryMiddleware(AgentMiddleware[Any, Any, Any]):
    """Runs each tool call of a ``create_agent`` agent through the boundary.

    ``sleep`` is the sync executor's sleeper, ``async_sleep`` the async
    one's; ``executor_options`` go to both (``safeguards``,
    ``tracer_provider``, ``policy``, ``hooks``, ``clock``, ...).
    """

    def __init__(
        self,
        declarations: Declarations | Mapping[str, Declaration] | None,
        *,
        conversation_id: IdOf = _thread_id,
        request_id: IdOf = _request_id,
        sleep: Callable[[float], None] | None = None,
        async_sleep: Callable[[float], Awaitable[None]] | None = None,
        **executor_options: Any,
    ) -> None:
        super().__init__()
        declared = Declarations.of(declarations)
        executor_options = shared_guards(executor_options)
        self._sync: Bridge[Executor] = Bridge(
            declared, lambda tools: Executor(tools, sleep=sleep, **executor_options)
        )
        self._async: Bridge[AsyncExecutor] = Bridge(
            declared, lambda tools: AsyncExecutor(tools, sleep=async_sleep, **executor_options)
        )
        self._conversation_id = conversation_id
        self._request_id = request_id
        self._schemas: dict[str, tuple[BaseTool, dict[str, Any]]] = {}

    @property
    def name(self) -> str:
        return "RetryBoundaryMiddleware"

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Reply]
    ) -> Reply:
        if request.tool is None:  # not registered: the ToolNode answers as it does
            return handler(request)
        executor = self._executor(self._sync, request.tool)
        replies: list[Reply] = []
        handed_over: list[BaseException] = []

        def attempt() -> Any:
            try:
                reply = handler(request)
            except GraphBubbleUp as exc:  # an interrupt: LangGraph's, not a failure
                raise hand_over(exc, handed_over) from exc
            content = _content(reply)
            replies.append(reply)
            return content

        with running(attempt):
            result = executor.execute(self._call(request))
        if handed_over:
            raise handed_over[-1]
        return _answer(request, result, replies)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Reply]],
    ) -> Reply:
        if request.tool is None:
            return await handler(request)
        executor = self._executor(self._async, request.tool)
        replies: list[Reply] = []
        handed_over: list[BaseException] = []

        async def attempt() -> Any:
            try:
                reply = await handler(request)
            except GraphBubbleUp as exc:
                raise hand_over(exc, handed_over) from exc
            content = _content(reply)
            replies.append(reply)
            return content

        with running(attempt):
            result = await executor.execute(self._call(request))
        if handed_over:
            raise handed_over[-1]
        return _answer(request, result, replies)

    def _executor(self, bridge: Bridge[Any], tool: BaseTool) -> Any:
        cached = self._schemas.get(tool.name)
        if cached is None or cached[0] is not tool:
            parameters = convert_to_openai_tool(tool)["function"].get("parameters") or {}
            cached = (tool, parameters)
            self._schemas[tool.name] = cached
        return bridge.executor(tool.name, cached[1], tool.description or "")

    def _call(self, request: ToolCallRequest) -> Any:
        raw = request.tool_call
        request_id = self._request_id(request) or ""
        return self._sync.declarations.tool_call(
            raw["name"],
            raw.get("id") or "",
            raw.get("args") or {},
            conversation_id=self._conversation_id(request) or "",
            request_id=request_id,
            turn_id=f"{request_id}-turn{_turn(request)}" if request_id else "",
        )


def _turn(request: ToolCallRequest) -> int:
    state = request.state
    messages = state.get("messages", []) if isinstance(state, Mapping) else state
    if not isinstance(messages, list):
        messages = getattr(state, "messages", [])
    return sum(isinstance(message, AIMessage) for message in messages)


def _content(reply: Reply) -> Any:
    """What the tool answered, as the data the boundary keeps (and may replay)."""
    if isinstance(reply, ToolMessage):
        if reply.status == "error":  # the tool handled its own failure: final
            raise ToolError("tool_error", _text(reply.content))
        return reply.content
    return None  # a Command updates graph state: nothing to keep but that it ran


def _answer(request: ToolCallRequest, result: ToolResult, replies: list[Reply]) -> Reply:
    name, call_id = request.tool_call["name"], request.tool_call.get("id") or ""
    if result.ok:
        fresh = not (result.replayed or result.reconciled or result.truncated)
        if fresh and replies:
            return replies[-1]
        return ToolMessage(
            content=_text(result.data), name=name, tool_call_id=call_id, status="success"
        )
    reply = model_reply(result)
    return ToolMessage(
        content=reply.text,
        name=name,
        tool_call_id=call_id,
        status="error",
        artifact=reply.payload,
    )


def _text(data: Any) -> str:
    return data if isinstance(data, str) else orjson.dumps(data, default=str).decode()


def guarded_tool_node(
    tools: list[BaseTool | Callable[..., Any]],
    declarations: Declarations | Mapping[str, Declaration] | None,
    *,
    name: str = "tools",
    **options: Any,
) -> ToolNode:
    """A LangGraph ``ToolNode`` running every call through the boundary.

    ``options`` are :class:`RetryBoundaryMiddleware`'s. The node's own error
    handling stays as LangGraph sets it: a tool's exception reaches the
    boundary, which answers the model.
    """
    boundary = RetryBoundaryMiddleware(declarations, **options)
    return ToolNode(
        tools,
        name=name,
        wrap_tool_call=boundary.wrap_tool_call,
        awrap_tool_call=boundary.awrap_tool_call,
    )
