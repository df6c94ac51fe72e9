"""The retry boundary for the OpenAI SDK: Chat Completions and the Responses API.

Extra ``toolspan[openai]``. The SDK's objects are read by field name, so this
module imports nothing from ``openai`` itself; what it returns are plain
dicts in the shapes the SDK accepts as-is in the next request::

    from toolspan.tracer.integrations import openai as ts_openai

    completion = client.chat.completions.create(model=..., messages=messages, tools=specs)
    messages.append(completion.choices[0].message)
    messages += ts_openai.answer_chat(executor, completion, conversation_id=cid,
                                      request_id=rid, declarations=declarations)

    response = client.responses.create(model=..., input=items, tools=specs)
    items += response.output
    items += ts_openai.answer_response(executor, response, conversation_id=cid,
                                       request_id=rid, declarations=declarations)

The tools themselves come from the ``tools`` definitions you already send
(:func:`tools_from_definitions`), merged with your declarations; an
undeclared tool is a write that is never repeated blind.
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
    "answer_chat",
    "answer_chat_async",
    "answer_response",
    "answer_response_async",
    "chat_tool_calls",
    "chat_tool_spec",
    "function_call_output",
    "response_tool_calls",
    "response_tool_spec",
    "tool_message",
    "tools_from_definitions",
]


def tools_from_definitions(
    definitions: Iterable[Mapping[str, Any]],
    functions: Mapping[str, Callable[..., Any]],
    declarations: Declarations | Mapping[str, Declaration] | None = None,
) -> list[Tool]:
    """toolspan tools from the ``tools`` you send (Chat or Responses shape) and their functions.

    Name, JSON Schema and description come from each definition; what the
    tool does to the world comes from ``declarations``.
    """
    declared = Declarations.of(declarations)
    tools = []
    for definition in definitions:
        # Chat nests the function ({"type": "function", "function": {...}}); Responses does not.
        spec = definition.get("function") or definition
        name = str(spec["name"])
        if name not in functions:
            raise ConfigurationError(f"no function given for the OpenAI tool {name!r}")
        tools.append(
            declared.tool(
                name,
                functions[name],
                parameters=spec.get("parameters"),
                description=str(spec.get("description") or ""),
            )
        )
    return tools


def chat_tool_spec(tool: Tool) -> dict[str, Any]:
    """The tool as a Chat Completions ``tools`` entry (the schema the executor checks)."""
    return tool.openai_schema()


def response_tool_spec(tool: Tool) -> dict[str, Any]:
    """The tool as a Responses API ``tools`` entry (a function tool, not strict)."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters or {"type": "object"}),
        "strict": False,
    }


def chat_tool_calls(
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> list[ToolCall]:
    """The tool calls of a ``ChatCompletion``, its message, or a list of ``tool_calls`` entries.

    Writes declared idempotent get ``derive_key(request_id, step)``.
    """
    ids = {"conversation_id": conversation_id, "request_id": request_id, "turn_id": turn_id}
    calls = [ToolCall.from_openai(raw, **ids) for raw in _chat_entries(source)]
    return _keyed(calls, declarations)


def response_tool_calls(
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> list[ToolCall]:
    """The ``function_call`` items of a Responses API ``Response`` (or a list of output items)."""
    output = field(source, "output")
    items = output if output is not None else source
    ids = {"conversation_id": conversation_id, "request_id": request_id, "turn_id": turn_id}
    calls = [
        ToolCall.from_openai(item, **ids)
        for item in items
        if field(item, "type") == "function_call"
    ]
    return _keyed(calls, declarations)


def tool_message(result: ToolResult) -> dict[str, Any]:
    """A Chat Completions ``role: tool`` message answering the call.

    Chat has no error flag: the structured status in the content is what
    tells the model the call failed and whether to try again.
    """
    return {"role": "tool", "tool_call_id": result.call_id, "content": model_reply(result).text}


def function_call_output(result: ToolResult) -> dict[str, Any]:
    """A Responses API ``function_call_output`` input item answering the call."""
    return {
        "type": "function_call_output",
        "call_id": result.call_id,
        "output": model_reply(result).text,
    }


def answer_chat(
    executor: Executor,
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> list[dict[str, Any]]:
    """Run a completion's tool calls through ``executor``; the ``role: tool`` messages."""
    calls = chat_tool_calls(
        source,
        conversation_id=conversation_id,
        request_id=request_id,
        turn_id=turn_id,
        declarations=_or_tools(declarations, executor),
    )
    return [tool_message(result) for result in execute_all(executor, calls)]


def answer_response(
    executor: Executor,
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> list[dict[str, Any]]:
    """Run a response's function calls through ``executor``; the ``function_call_output`` items."""
    calls = response_tool_calls(
        source,
        conversation_id=conversation_id,
        request_id=request_id,
        turn_id=turn_id,
        declarations=_or_tools(declarations, executor),
    )
    return [function_call_output(result) for result in execute_all(executor, calls)]


async def answer_chat_async(
    executor: AsyncExecutor,
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> list[dict[str, Any]]:
    """:func:`answer_chat` for ``AsyncOpenAI`` and the :class:`AsyncExecutor`."""
    calls = chat_tool_calls(
        source,
        conversation_id=conversation_id,
        request_id=request_id,
        turn_id=turn_id,
        declarations=_or_tools(declarations, executor),
    )
    return [tool_message(result) for result in await execute_all_async(executor, calls)]


async def answer_response_async(
    executor: AsyncExecutor,
    source: Any,
    *,
    conversation_id: str,
    request_id: str = "",
    turn_id: str = "",
    declarations: Declarations | None = None,
) -> list[dict[str, Any]]:
    """:func:`answer_response` for ``AsyncOpenAI`` and the :class:`AsyncExecutor`."""
    calls = response_tool_calls(
        source,
        conversation_id=conversation_id,
        request_id=request_id,
        turn_id=turn_id,
        declarations=_or_tools(declarations, executor),
    )
    return [function_call_output(result) for result in await execute_all_async(executor, calls)]


def _chat_entries(source: Any) -> Sequence[Any]:
    choices = field(source, "choices")
    if choices is not None:  # a ChatCompletion: its first choice's message
        source = field(choices[0], "message") if choices else None
    if source is None:
        return []
    if type(source) is list or type(source) is tuple:  # already the tool_calls entries
        return source
    entries = field(source, "tool_calls")
    if entries is None and isinstance(source, Sequence) and not isinstance(source, str | bytes):
        return source
    return entries or []


def _keyed(calls: list[ToolCall], declarations: Declarations | None) -> list[ToolCall]:
    return calls if declarations is None else [declarations.keyed(call) for call in calls]


def _or_tools(
    declarations: Declarations | None, executor: Executor | AsyncExecutor
) -> Declarations:
    # Without declarations, keys follow what the executor's tools say about themselves.
    if declarations is not None:
        return declarations
    return Declarations.from_tools(executor.tools.values())
