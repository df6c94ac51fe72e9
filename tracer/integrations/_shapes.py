"""Tool calls in the providers' shapes, as dicts or as SDK objects, without importing an SDK.

The OpenAI and Anthropic SDKs hand out pydantic models
(``ChatCompletionMessageFunctionToolCall``, ``ResponseFunctionToolCall``,
``ToolUseBlock``); JSON from the wire, logs or tests gives dicts of the same
shape. Both are read here by field name, so the core needs neither SDK.
A shape that is not a function call (an OpenAI custom tool, a block of
another type) still yields its name and raw input: the executor answers it
with a structured ``unknown_tool`` or ``invalid_arguments`` result that the
model sees, instead of an exception that ends the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["anthropic_fields", "field", "openai_fields"]

# (name, call_id, arguments): what a ToolCall needs from a provider's call.
Fields = tuple[str, str, Any]


_ABSENT = object()


def field(item: Any, name: str) -> Any:
    """``item[name]`` for a mapping, ``item.name`` for an SDK object; ``None`` if absent."""
    # Exact-type and attribute checks first: an ABC isinstance costs more than the rest.
    if type(item) is dict:
        return item.get(name)
    value = getattr(item, name, _ABSENT)
    if value is not _ABSENT:
        return value
    return item.get(name) if isinstance(item, Mapping) else None


def openai_fields(tool_call: Any) -> Fields:
    """From a Chat Completions ``tool_calls`` entry or a Responses ``function_call`` item."""
    if field(tool_call, "type") == "function_call":  # Responses API output item
        return (
            str(field(tool_call, "name") or ""),
            str(field(tool_call, "call_id") or ""),
            field(tool_call, "arguments") or "{}",
        )
    function = field(tool_call, "function")
    if function is None:  # a custom tool: free-form input, not JSON arguments
        function = field(tool_call, "custom")
        arguments = None if function is None else field(function, "input")
    else:
        arguments = field(function, "arguments")
    return (
        str(field(function, "name") or "") if function is not None else "",
        str(field(tool_call, "id") or ""),
        arguments or "{}",
    )


def anthropic_fields(block: Any) -> Fields:
    """From a Messages ``tool_use`` content block (dict or ``ToolUseBlock``)."""
    return (
        str(field(block, "name") or ""),
        str(field(block, "id") or ""),
        field(block, "input") or {},
    )
