"""An upstream of the tasks extension whose task asks for input, and whose resource
changes outside any call (real ``mcp`` SDK server; issue 41).

``approve_shipment`` run as a task needs the user's confirmation: its task
goes to ``input_required``, and, as the tasks spec says, the server sends its
``elicitation/create`` on the requestor's ``tasks/result``, then answers that
``tasks/result`` with the task's final result once the task ended.
``touch_stock`` answers at once and, when the test says so (``Jobs.touch``),
changes ``shop://stock`` after its call is over: a
``notifications/resources/updated`` on the session's standalone channel, sent
(handshake era) only while the session is subscribed to it, as a server that
honours ``resources/unsubscribe`` does.

``python -m tests.integrations.mcp_task_server`` serves it on stdio (the
resource is then changed 0.3 s after ``touch_stock`` answered).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter

STOCK_URI = "shop://stock"
QUESTION = "Ship order {order_id} now?"


INPUT_KEY = "approval"


class Approval(BaseModel):
    ok: bool


class TaskResultParams(mcp_types.GetTaskPayloadRequestParams):
    """``tasks/result``, retried with the input its ``InputRequiredResult`` asked for."""

    input_responses: mcp_types.InputResponses | None = None
    request_state: str | None = None


class TaskResultRequest(mcp_types.Request[TaskResultParams, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    params: TaskResultParams


# What a tasks/result answers: the task's result, or a question first.
TASK_RESULT = TypeAdapter[mcp_types.InputRequiredResult | mcp_types.CallToolResult](
    mcp_types.InputRequiredResult | mcp_types.CallToolResult
)


@dataclass
class _Task:
    """One task: its run, and the question it waits on (``input_required``)."""

    task_id: str
    run: asyncio.Future[Any] | None = None
    question: str | None = None
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    answered: asyncio.Future[dict[str, Any]] | None = None


_CURRENT: ContextVar[_Task | None] = ContextVar("mcp_task_server_task", default=None)


@dataclass
class Jobs:
    """The server's side: what happened, for the tests to check."""

    shipped: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # tasks/* methods and elicitations
    touch: asyncio.Event | None = None  # set by a test: change the stock now
    touch_delay_s: float = 0.3  # without a test's event (the stdio server)
    tasks: dict[str, _Task] = field(default_factory=dict)
    later: list[asyncio.Future[None]] = field(default_factory=list)
    subscribed: set[str] = field(default_factory=set)  # the (one) session's subscriptions
    unsubscribed: asyncio.Event | None = None  # set by a resources/unsubscribe, if given


class AskingTasks(Extension):
    """The tasks extension: a ``tools/call`` with ``task`` answers with a task at once;
    a task that needs input is ``input_required`` until a ``tasks/result`` carries
    its question to the client."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs
        self.ids = itertools.count(1)

    async def intercept_tool_call(
        self,
        params: mcp_types.CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.task is None:
            return await call_next(ctx)
        task = _Task(f"task-{next(self.ids)}")
        self.jobs.tasks[task.task_id] = task
        token = _CURRENT.set(task)  # the run's copy of the context sees its task
        try:
            task.run = asyncio.ensure_future(call_next(ctx))
        finally:
            _CURRENT.reset(token)
        return {"resultType": "task", "task": self._status(task)}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("tasks/get", mcp_types.GetTaskRequestParams, self._get),
            MethodBinding("tasks/result", TaskResultParams, self._result),
        )

    def _status(self, task: _Task) -> dict[str, Any]:
        if task.run is not None and task.run.done():
            status = "completed"
        elif task.question is not None:
            status = "input_required"
        else:
            status = "working"
        return {
            "taskId": task.task_id,
            "status": status,
            "createdAt": "2026-12-01T00:00:00Z",
            "lastUpdatedAt": "2026-12-01T00:00:00Z",
            "ttl": 60_000,
            "pollInterval": 10,
        }

    async def _get(self, ctx: Any, params: mcp_types.GetTaskRequestParams) -> HandlerResult:
        self.jobs.requests.append("tasks/get")
        return self._status(self.jobs.tasks[params.task_id])

    async def _result(
        self, ctx: ServerRequestContext[Any, Any], params: TaskResultParams
    ) -> HandlerResult:
        """Until the task ends: the answer it waits for (a retry's ``inputResponses``)
        goes to it; a question it asks is this request's ``InputRequiredResult``
        (2026-07-28 has no back-channel for the server's own requests)."""
        self.jobs.requests.append("tasks/result")
        task = self.jobs.tasks[params.task_id]
        assert task.run is not None
        response = (params.input_responses or {}).get(INPUT_KEY)
        if response is not None and task.answered is not None and not task.answered.done():
            task.answered.set_result(response.model_dump(by_alias=True, exclude_none=True))
        asked = asyncio.ensure_future(task.asked.wait())
        await asyncio.wait({task.run, asked}, return_when=asyncio.FIRST_COMPLETED)
        asked.cancel()
        if task.run.done():
            return task.run.result()
        self.jobs.requests.append("elicitation/create")
        elicit = mcp_types.ElicitRequestFormParams(
            message=task.question or "", requested_schema=Approval.model_json_schema()
        )
        return mcp_types.InputRequiredResult(
            input_requests={INPUT_KEY: mcp_types.ElicitRequest(params=elicit)},
            request_state=task.task_id,
        ).model_dump(by_alias=True, mode="json", exclude_none=True)


async def _ask(question: str) -> dict[str, Any]:
    """The running task's question: ``input_required`` until a ``tasks/result`` asks it."""
    task = _CURRENT.get()
    assert task is not None, "approve_shipment runs as a task"
    task.answered = asyncio.get_running_loop().create_future()
    task.question = question
    task.asked.set()
    try:
        return await task.answered
    finally:
        task.question = None
        task.asked.clear()


def task_server(jobs: Jobs) -> MCPServer:
    server = MCPServer("tasks", extensions=[AskingTasks(jobs)])

    @server.tool()
    async def approve_shipment(order_id: str, ctx: Context) -> str:
        """Ship an order once the user confirmed it (run as a task)."""
        answer = await _ask(QUESTION.format(order_id=order_id))
        content = answer.get("content") or {}
        if answer.get("action") != "accept" or content.get("ok") is not True:
            return f"not shipped {order_id}"
        jobs.shipped.append(order_id)
        return f"shipped {order_id}"

    @server.tool()
    async def touch_stock(ctx: Context) -> str:
        """Change ``shop://stock`` once this call is over (outside any call)."""
        session = ctx.request_context.session

        modern = session.protocol_version in MODERN_PROTOCOL_VERSIONS

        async def later() -> None:
            if jobs.touch is not None:
                await jobs.touch.wait()
            else:
                await asyncio.sleep(jobs.touch_delay_s)
            if modern:  # 2026-07-28: to the subscriptions/listen streams
                await ctx.notify_resource_updated(STOCK_URI)
            elif STOCK_URI in jobs.subscribed:  # no related request: the standalone channel
                await session.send_resource_updated(STOCK_URI)

        jobs.requests.append("touch_stock")
        jobs.later.append(asyncio.ensure_future(later()))  # held: not collected mid-way
        return "stock will change"

    async def subscribe(ctx: Any, params: mcp_types.SubscribeRequestParams) -> HandlerResult:
        jobs.requests.append(f"resources/subscribe {params.uri}")
        jobs.subscribed.add(params.uri)
        return {}

    async def unsubscribe(ctx: Any, params: mcp_types.UnsubscribeRequestParams) -> HandlerResult:
        jobs.requests.append(f"resources/unsubscribe {params.uri}")
        jobs.subscribed.discard(params.uri)
        if jobs.unsubscribed is not None:
            jobs.unsubscribed.set()
        return {}

    # The handshake era's resources/subscribe (MCPServer serves only subscriptions/listen).
    server._lowlevel_server.add_request_handler(
        "resources/subscribe", mcp_types.SubscribeRequestParams, subscribe
    )
    server._lowlevel_server.add_request_handler(
        "resources/unsubscribe", mcp_types.UnsubscribeRequestParams, unsubscribe
    )

    @server.resource(STOCK_URI)
    def stock() -> str:
        """A resource that changes outside any call."""
        return "12 boxes"

    return server


if __name__ == "__main__":
    task_server(Jobs()).run("stdio")
