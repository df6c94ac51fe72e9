"""Which calls of one model step may run side by side.

A model can emit several tool calls in one step. Reads run concurrently.
Writes that share a resource (``Tool.resource_key``, whichever tools they
are: a refund and a cancel of one order) run one after another; writes on
different resources run in parallel only when each carries its own
idempotency key; writes without a key all queue in one lane. Every call keeps
its place in the model's order in the results. The executor records the same
resource as ``toolspan.resource.key``, so the analyzer's ``parallel_write``
never flags what this plan serialised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ._tool import Tool, ToolCall

__all__ = ["plan_lanes", "resource_of"]


def plan_lanes(calls: Sequence[ToolCall], tools: Mapping[str, Tool]) -> list[list[int]]:
    """Group call indexes into lanes: lanes run in parallel, a lane in order."""
    parent = list(range(len(calls)))

    def find(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    def join(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    first_by_resource: dict[str, int] = {}
    first_unkeyed: int | None = None
    for index, call in enumerate(calls):
        declared = tools.get(call.name)
        if declared is None or not declared.is_write:
            continue
        resource = _resource(declared, call)
        if resource is not None:
            join(index, first_by_resource.setdefault(resource, index))
        if not call.idempotency_key:
            first_unkeyed = index if first_unkeyed is None else first_unkeyed
            join(index, first_unkeyed)
    lanes: dict[int, list[int]] = {}
    for index in range(len(calls)):
        lanes.setdefault(find(index), []).append(index)
    return list(lanes.values())


def _resource(declared: Tool, call: ToolCall) -> str | None:
    if declared.resource_key is None:
        return None
    arguments = call.arguments
    try:
        if isinstance(arguments, str):
            arguments = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:  # bad arguments: the executor refuses the call itself
        return None
    return resource_of(declared, arguments)


def resource_of(declared: Tool, arguments: Any) -> str | None:
    """The resource a write touches (``Tool.resource_key`` of its arguments), or
    ``None`` when the tool declares none or its function fails on them."""
    if declared.resource_key is None or not isinstance(arguments, Mapping):
        return None
    try:
        return str(declared.resource_key(arguments))
    except Exception:  # bad arguments: the executor refuses the call itself
        return None
