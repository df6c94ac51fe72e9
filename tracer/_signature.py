"""A JSON Schema for a tool declared without one, derived from its function's signature.

A model can send any arguments; without a schema, an unknown or missing one
would reach the function as a ``TypeError`` (a bug in the tool, as far as the
executor can tell) instead of an ``invalid_arguments`` result the model can
repair. So a tool without ``parameters`` gets the schema its signature
implies: one property per parameter, the ones without defaults required, no
others allowed unless the function takes ``**kwargs``, and a JSON type where
the annotation maps to one plainly. An explicit schema always wins.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["KEY_PARAMETER", "schema_from_signature", "takes_key"]

# The parameter through which a tool function receives its call's idempotency
# key. The executor fills it in; it is never part of the model-facing schema.
KEY_PARAMETER = "idempotency_key"

_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    tuple: "array",
    dict: "object",
}


def schema_from_signature(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """The schema ``fn``'s signature implies, or ``None`` when it has none to read."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins and C callables
        return None
    hints = _hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    open_ended = False
    for name, parameter in signature.parameters.items():
        if name == KEY_PARAMETER:
            continue  # the executor's to fill in, never the model's
        if parameter.kind is parameter.VAR_KEYWORD:
            open_ended = True
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.POSITIONAL_ONLY):
            continue  # never filled from keyword arguments
        properties[name] = _property(hints.get(name, parameter.annotation))
        if parameter.default is parameter.empty:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if not open_ended:
        schema["additionalProperties"] = False
    return schema


def takes_key(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` declares an ``idempotency_key`` parameter that can be passed by name."""
    try:
        parameter = inspect.signature(fn).parameters.get(KEY_PARAMETER)
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (
        parameter.POSITIONAL_OR_KEYWORD,
        parameter.KEYWORD_ONLY,
    )


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
    try:
        return typing.get_type_hints(target)
    except Exception:  # unresolvable string annotations: fall back to no types
        return {}


def _property(annotation: Any) -> dict[str, Any]:
    """A JSON type for plain annotations; no constraint for anything else."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(annotation))}
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(members) < len(typing.get_args(annotation))
        inner = _property(members[0]) if len(members) == 1 else {}
        if nullable and "type" in inner:
            return {"type": [inner["type"], "null"]}
        return inner if not nullable else {}
    base = origin or annotation
    if base in _JSON_TYPES:
        return {"type": _JSON_TYPES[base]}
    if isinstance(base, type) and issubclass(base, Mapping):
        return {"type": "object"}
    if isinstance(base, type) and issubclass(base, Sequence) and not issubclass(base, str):
        return {"type": "array"}
    return {}
