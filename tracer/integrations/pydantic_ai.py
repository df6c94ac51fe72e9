"""The retry boundary inside Pydantic AI (extra ``toolspan[pydantic-ai]``).

Add the :class:`RetryBoundary` capability to an agent and every call of its
function tools (its own, its toolsets', its MCP servers') runs through a
toolspan executor; name, JSON Schema and description come from each tool's
definition, what only the application knows from its :class:`Declarations`::

    from toolspan.tracer.integrations import Declaration, Declarations
    from toolspan.tracer.integrations.pydantic_ai import RetryBoundary

    agent = Agent(model, tools=[get_order, refund_order], capabilities=[RetryBoundary(
        Declarations({"get_order": Declaration.read(),
                      "refund_order": Declaration.write(idempotent=True, resource_key=by_order,
                                                        key_passed="Idempotency-Key header")}),
        safeguards=Safeguards(store=store), tracer_provider=provider)])
    agent.run_sync(text, conversation_id=conversation_id, run_id=request_id)

Ids: the conversation is the run's ``conversation_id`` and the request its
``run_id`` (both resolved by Pydantic AI for every run; pass them to
``Agent.run`` to make them yours: a request re-run after a crash must keep
its run id for its keys to match), the turn is the run step. To wrap one
toolset instead of the agent's, use :func:`guard_toolset`.

Pydantic AI validates the arguments first (a validation error stays its
retry prompt); each attempt then calls the wrapped toolset as before. A
failure reaches the model as Pydantic AI's native failed tool result
(:class:`pydantic_ai.exceptions.ToolFailed`: it does not use up the tool's
retry budget), whose content is the structured result as JSON. Pydantic
AI's own ``execute_tool`` spans stay; toolspan's call span nests inside, and
the analyzer counts the call once. The framework's control flow
(``ModelRetry``, ``ToolFailed``, ``CallDeferred``, ``ApprovalRequired``
raised by a tool) ends the attempt as ``control_flow`` (never repeated; a
write's key is released) and then passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import to_jsonable_python

from .._executor import AsyncExecutor
from ._common import Declaration, Declarations, model_reply
from ._frameworks import Bridge, hand_over, running, shared_guards

__all__ = ["GuardedToolset", "IdOf", "RetryBoundary", "guard_toolset"]

# Raised by tools to steer Pydantic AI, not failures: passed through unchanged.
_CONTROL_FLOW = (ModelRetry, ToolFailed, CallDeferred, ApprovalRequired)

# A run id read from the run context: the conversation or the request.
IdOf = Callable[[RunContext[Any]], str | None]


def _conversation_id(ctx: RunContext[Any]) -> str | None:
    return ctx.conversation_id


def _run_id(ctx: RunContext[Any]) -> str | None:
    return ctx.run_id


@dataclass
class GuardedToolset(WrapperToolset[Any]):
    """A toolset whose every call runs through the boundary; build with :func:`guard_toolset`."""

    bridge: Bridge[AsyncExecutor]
    conversation_id: IdOf = _conversation_id
    request_id: IdOf = _run_id

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        definition = tool.tool_def
        executor = self.bridge.executor(
            name, definition.parameters_json_schema, definition.description or ""
        )
        request_id = self.request_id(ctx) or ""
        call = self.bridge.declarations.tool_call(
            name,
            ctx.tool_call_id or "",
            # What the model sent, as JSON: the validated arguments may hold
            # richer types (dates, models) that the JSON Schema would reject.
            to_jsonable_python(tool_args),
            conversation_id=self.conversation_id(ctx) or "",
            request_id=request_id,
            turn_id=f"{request_id}-step{ctx.run_step}" if request_id else "",
        )
        handed_over: list[BaseException] = []

        async def attempt() -> Any:
            try:
                return await self.wrapped.call_tool(name, tool_args, ctx, tool)
            except _CONTROL_FLOW as exc:
                raise hand_over(exc, handed_over) from exc

        with running(attempt):
            result = await executor.execute(call)
        if handed_over:
            raise handed_over[-1]
        if result.ok:
            return result.data
        raise ToolFailed(model_reply(result).text)


def guard_toolset(
    toolset: AbstractToolset[Any],
    declarations: Declarations | Mapping[str, Declaration] | None,
    *,
    conversation_id: IdOf = _conversation_id,
    request_id: IdOf = _run_id,
    **executor_options: Any,
) -> GuardedToolset:
    """``toolset`` with every call behind the boundary.

    ``executor_options`` go to the :class:`AsyncExecutor` (``safeguards``,
    ``tracer_provider``, ``policy``, ``hooks``, ``sleep``, ``clock``, ...).
    """
    options = shared_guards(executor_options)
    bridge = Bridge(
        Declarations.of(declarations), lambda declared: AsyncExecutor(declared, **options)
    )
    return GuardedToolset(toolset, bridge, conversation_id, request_id)


@dataclass(init=False)
class RetryBoundary(AbstractCapability[Any]):
    """The capability that puts all of an agent's function tools behind the boundary.

    Takes the same arguments as :func:`guard_toolset`; one executor per tool
    is built once and shared by every run of the agent.
    """

    def __init__(
        self,
        declarations: Declarations | Mapping[str, Declaration] | None,
        *,
        conversation_id: IdOf = _conversation_id,
        request_id: IdOf = _run_id,
        **executor_options: Any,
    ) -> None:
        options = shared_guards(executor_options)
        self._bridge: Bridge[AsyncExecutor] = Bridge(
            Declarations.of(declarations), lambda declared: AsyncExecutor(declared, **options)
        )
        self._conversation_id = conversation_id
        self._request_id = request_id

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds functions: not expressible in an agent spec

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return GuardedToolset(toolset, self._bridge, self._conversation_id, self._request_id)
