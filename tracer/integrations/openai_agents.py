"""The retry boundary inside the OpenAI Agents SDK (extra ``toolspan[openai-agents]``).

Every :class:`agents.FunctionTool` of an agent gets a twin whose invocation
runs through a toolspan executor: the SDK's tool-call id is the ``call_id``,
name, JSON Schema and description come from the tool itself, and what only
the application knows (which tools write, which keys protect them, which
have a read-back) comes from its :class:`Declarations`::

    from toolspan.tracer.integrations import Declaration, Declarations
    from toolspan.tracer.integrations.openai_agents import guard_agent

    agent = guard_agent(Agent(name="desk", tools=[get_order, refund_order]), Declarations({
        "get_order": Declaration.read(),
        "refund_order": Declaration.write(idempotent=True, resource_key=by_order,
                                          key_passed="Idempotency-Key header"),
    }), safeguards=Safeguards(store=store), tracer_provider=provider)
    await Runner.run(agent, text, run_config=RunConfig(
        group_id=conversation_id, trace_metadata={"request_id": request_id}))

Ids: the conversation is the run's ``group_id`` (the SDK's own "chat thread"
id) and the request is ``trace_metadata["request_id"]``, unless
``conversation_id=`` / ``request_id=`` say otherwise (functions of the
:class:`agents.ToolContext`, e.g. ``lambda ctx: ctx.context.session_id``
for a session id kept in the run's context). Without a request id no idempotency key can be
derived, so no write is ever repeated.

Each attempt calls the SDK's own invocation (argument parsing, context
injection, guardrails stay where they were) with the SDK's failure formatter
switched off, so the executor sees the tool's exception and classifies it.
The tool's ``timeout_seconds`` applies to each attempt and an expiry is the
failure code ``timeout``. A failure reaches the model as the SDK's native
error result, a tool output string, here the structured result as JSON
(``status``, ``error_code``, ``retryable``, ...); the run goes on. An
exception the executor does not classify (a bug in the tool) is recorded on
the spans and then handled by the tool's own failure policy, as without
the boundary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard

from agents import Agent, FunctionTool, ToolTimeoutError
from agents.tool import Tool as AgentTool
from agents.tool import (
    invoke_function_tool,
    maybe_invoke_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext

from .._errors import ToolError
from .._executor import AsyncExecutor
from ._common import Declaration, Declarations, model_reply
from ._frameworks import Bridge, running, shared_guards

__all__ = ["IdOf", "guard_agent", "guard_tools"]

# A run id read from the tool's context: the conversation or the request.
IdOf = Callable[[ToolContext[Any]], str | None]


def _group_id(ctx: ToolContext[Any]) -> str | None:
    return None if ctx.run_config is None else ctx.run_config.group_id


def _request_id(ctx: ToolContext[Any]) -> str | None:
    metadata = None if ctx.run_config is None else ctx.run_config.trace_metadata
    value = (metadata or {}).get("request_id")
    return None if value is None else str(value)


def guard_tools(
    tools: Iterable[AgentTool],
    declarations: Declarations | Mapping[str, Declaration] | None,
    *,
    conversation_id: IdOf = _group_id,
    request_id: IdOf = _request_id,
    **executor_options: Any,
) -> list[AgentTool]:
    """``tools`` with every :class:`FunctionTool` behind the boundary; others unchanged.

    Hosted tools run at OpenAI and an agent used as a tool (``as_tool``) is
    an agent loop of its own (guard its tools): both are left as they are.

    ``executor_options`` go to the :class:`AsyncExecutor` (``safeguards``,
    ``tracer_provider``, ``policy``, ``hooks``, ``sleep``, ``clock``, ...).
    """
    options = shared_guards(executor_options)
    bridge = Bridge(
        Declarations.of(declarations), lambda declared: AsyncExecutor(declared, **options)
    )
    return [
        _guard(tool, bridge, conversation_id, request_id) if _guardable(tool) else tool
        for tool in tools
    ]


def _guardable(tool: AgentTool) -> TypeGuard[FunctionTool]:
    # An agent used as a tool runs a nested agent loop of its own (interruptions,
    # nested results): guard that agent's tools instead.
    return isinstance(tool, FunctionTool) and not tool._is_agent_tool


def guard_agent(
    agent: Agent[Any],
    declarations: Declarations | Mapping[str, Declaration] | None,
    *,
    conversation_id: IdOf = _group_id,
    request_id: IdOf = _request_id,
    **executor_options: Any,
) -> Agent[Any]:
    """A clone of ``agent`` whose function tools run behind the boundary (see :func:`guard_tools`).

    Handoff targets are agents of their own: guard them the same way.
    """
    return agent.clone(
        tools=guard_tools(
            agent.tools,
            declarations,
            conversation_id=conversation_id,
            request_id=request_id,
            **executor_options,
        )
    )


def _guard(
    tool: FunctionTool, bridge: Bridge[AsyncExecutor], conversation_id: IdOf, request_id: IdOf
) -> FunctionTool:
    # The SDK's own invocation, raising instead of formatting failures for the
    # model, and with the per-attempt timeout raising too: the executor decides.
    inner = dataclasses.replace(tool, timeout_behavior="raise_exception")
    set_function_tool_failure_error_function(inner, None)
    executor = bridge.executor(tool.name, tool.params_json_schema, tool.description)

    async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
        async def attempt() -> Any:
            try:
                return await invoke_function_tool(
                    function_tool=inner, context=ctx, arguments=arguments
                )
            except ToolTimeoutError as exc:
                raise ToolError("timeout", str(exc)) from exc

        call = bridge.declarations.tool_call(
            tool.name,
            ctx.tool_call_id,
            arguments,
            conversation_id=conversation_id(ctx) or "",
            request_id=request_id(ctx) or "",
        )
        with running(attempt):
            try:
                result = await executor.execute(call)
            except Exception as exc:
                # A bug in the tool (recorded on the spans): the SDK's own
                # failure policy answers, as it would without the boundary.
                message = await maybe_invoke_function_tool_failure_error_function(
                    function_tool=tool, context=ctx, error=exc
                )
                if message is None:
                    raise
                return message
        if result.ok:
            return result.data
        return model_reply(result).text

    # The twin keeps approvals, guardrails and the rest; the timeout moved inside.
    return dataclasses.replace(tool, on_invoke_tool=invoke, timeout_seconds=None)
