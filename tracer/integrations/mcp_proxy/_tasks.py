"""MCP's own read-back: a call run as a task is read through ``tasks/get`` and ``tasks/result``.

A tool declared ``task = true`` is called upstream with ``task`` in its
params. A server of the tasks extension answers at once with a task handle
(``resultType: "task"``); the proxy then polls ``tasks/get`` until the task
ends and fetches its result with ``tasks/result``. Those two are reads: when
one of their answers is lost, the write does not have to be repeated to
learn its outcome. The proxy remembers each task by its call (conversation,
tool, arguments), and the tool's read-back reads the task again; a client
repeating a call whose outcome stayed unknown gets the task's result too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from ..._canonical import canonical_json
from ..._errors import ToolError

__all__ = ["Ask", "FetchWithInput", "TaskBook", "await_task", "task_id_of"]

Ask = Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
# ``tasks/result`` of a task waiting for input, with the input relayed (its params given).
FetchWithInput = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

_ENDED = frozenset({"completed", "failed"})
_STOPPED = frozenset({"cancelled", "input_required"})
_MAX_POLL_S = 1.0
MAX_WAIT_S = 3600.0  # a task that never ends does not hold a call forever


def task_id_of(answer: Mapping[str, Any]) -> str | None:
    """The task id when a ``tools/call`` was answered with a task (else ``None``)."""
    task = answer.get("task")
    task_id = task.get("taskId") if isinstance(task, Mapping) else None
    return task_id if isinstance(task_id, str) and task_id else None


async def await_task(
    ask: Ask,
    task_id: str,
    meta: Mapping[str, Any],
    sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
    with_input: FetchWithInput | None = None,
) -> dict[str, Any]:
    """Poll ``tasks/get`` until the task ends (``sleep`` between polls), then its ``tasks/result``.

    A task waiting for input (``input_required``) is fetched with
    ``with_input``: as the tasks spec says, the requestor calls
    ``tasks/result``, the server asks its questions on it, and it answers once
    the task ended. A lost answer raises the classified ``timeout`` or
    ``connection_error`` of ``ask``; a task cancelled, or waiting for input
    where there is no ``with_input`` (no client to ask), ends the call.
    """
    with anyio.fail_after(MAX_WAIT_S):
        while True:
            task = await ask("tasks/get", _params(task_id, meta))
            status = task.get("status")
            if status in _ENDED:
                break
            if status == "input_required" and with_input is not None:
                return await with_input(_params(task_id, meta))
            if status in _STOPPED:
                raise ToolError(f"mcp_task_{status}", f"the upstream task {task_id} is {status}")
            await sleep(_poll_s(task))
    return await ask("tasks/result", _params(task_id, meta))


class TaskBook:
    """Which task each call started, so a later read-back finds it."""

    def __init__(self) -> None:
        self._tasks: dict[tuple[str, str, bytes], str] = {}

    def note(self, conversation: str, tool: str, arguments: Any, task_id: str) -> None:
        self._tasks[(conversation, tool, canonical_json(arguments))] = task_id

    def find(self, conversation: str, tool: str, arguments: Any) -> str | None:
        return self._tasks.get((conversation, tool, canonical_json(arguments)))


def _params(task_id: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = {"taskId": task_id}
    if meta:
        params["_meta"] = dict(meta)
    return params


def _poll_s(task: Mapping[str, Any]) -> float:
    interval = task.get("pollInterval")
    if isinstance(interval, int | float) and not isinstance(interval, bool) and interval > 0:
        return min(interval / 1000, _MAX_POLL_S)
    return 0.1
