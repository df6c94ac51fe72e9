"""The retry boundary for the Anthropic SDK (Messages API).

Extra ``toolspan[anthropic]``. ``ToolUseBlock`` objects are read by field
name, so this module imports nothing from ``anthropic``; the ``tool_result``
blocks it returns are accepted as-is in the next request, with ``is_error``
set on every failure::

    from toolspan.tracer.integrations import anthropic as ts_anthropic

    message = client.messages.create(model=..., messages=messages, tools=specs, ...)
    messages.append({"role": "assistant", "content": message.content})
    if message.stop_reason == "tool_use":
        messages.append(ts_anthropic.answer(executor, message, conversation_id=cid,
                                            request_id=rid, declarations=declarations))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._errors import ConfigurationError
from .._executor import AsyncExecutor, Executor
from .._result import ToolResult
from .._tool import Tool, ToolCall
from ._common import Declaration, Declarations, execute_all, execute_all_async, model_reply
from ._shapes import field

__all__ = [
    "answer",
    "answer_async",
    "tool_calls",
    "tool_result_block",
    "tool_spec",
    "tools_from_definitions",
]


def tools_from_definitions(
    definitions: Iterable[Mapping[str, Any]],
    functions: Mapping[str, Callable[..., Any]],
    declarations: Declarations | Mapping[str, Declaration] | None = None,
) -> list[Tool]:
    """toolspan tools from the ``tools`` you send (name, ``input_schema``) and their functions."""
    declared = Declarations.of(declarations)
    tools = []
    for definition in definitions:
        name = str(definition["name"])
        if name not in functions:
            raise ConfigurationError(f"no function given for the Anthropic tool {name!r}")
        tools.append(
            declared.tool(
                name,
                functions[name],
                parameters=definition.get("input_schema"),
                description=str(definition.get("description") or ""),
            )
        )
    return tools


def tool_spec(tool: Tool) -> dict[str, Any]:
    """The tool as an entry of ``tools`` (the schema the executor checks)."""
    return tool.anthropic_schema()


def tool_calls(
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> list[ToolCall]:
    """The ``tool_use`` blocks of a ``Message`` (or of a list of content blocks) as ToolCalls.

    Writes declared idempotent get ``derive_key(request_id, step)``.
    """
    content = field(source, "content")
    blocks: Sequence[Any] = content if content is not None else source
    ids = {"conversation_id": conversation_id, "request_id": request_id, "turn_id": turn_id}
    calls = [
        ToolCall.from_anthropic(block, **ids)
        for block in blocks
        if field(block, "type") == "tool_use"
    ]
    return calls if declarations is None else [declarations.keyed(call) for call in calls]


def tool_result_block(result: ToolResult) -> dict[str, Any]:
    """A ``tool_result`` content block answering the call; ``is_error`` on every failure."""
    reply = model_reply(result)
    return {
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": reply.text,
        "is_error": reply.is_error,
    }


def answer(
    executor: Executor,
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> dict[str, Any]:
    """Run a message's tool calls through ``executor``; the ``user`` message with the results."""
    calls = _calls(executor, source, conversation_id, request_id, turn_id, declarations)
    return _results_message(execute_all(executor, calls))


async def answer_async(
    executor: AsyncExecutor,
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> dict[str, Any]:
    """:func:`answer` for ``AsyncAnthropic`` and the :class:`AsyncExecutor`."""
    calls = _calls(executor, source, conversation_id, request_id, turn_id, declarations)
    return _results_message(await execute_all_async(executor, calls))


def _calls(
    executor: Executor | AsyncExecutor,
    source: Any,
    conversation_id: str,
    request_id: str,
    turn_id: str,
    declarations: Declarations | None,
) -> list[ToolCall]:
    if declarations is None:  # keys follow what the executor's tools say about themselves
        declarations = Declarations.from_tools(executor.tools.values())
    return tool_calls(
        source,
        conversation_id=conversation_id,
        request_id=request_id,
        turn_id=turn_id,
        declarations=declarations,
    )


def _results_message(results: list[ToolResult]) -> dict[str, Any]:
    return {"role": "user", "content": [tool_result_block(result) for result in results]}
