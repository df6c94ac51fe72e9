"""What the framework adapters share: an executor per framework tool, and the call in flight.

A framework hands its adapter one tool invocation at a time, with objects
only the framework understands (a run context, a tool definition, a handler
that runs the tool). The executor wants a :class:`Tool` whose function it may
call as often as the policy allows. The bridge between the two: every
framework tool becomes a ``Tool`` whose function is :func:`_dispatch`, which
runs what the adapter set with :func:`running` for this invocation (the
framework's own way to run the tool, with its own context and its own
validated arguments). Every attempt the executor makes is one such run.

Executors are built lazily, one per tool definition, because a framework
may show its tools only at call time (LangChain middleware) or change them
between steps (Pydantic AI toolsets). Executors hold no per-call state; the
idempotency store, turn budget and loop guard live in the ``Safeguards``
every executor shares, so one per tool behaves like one for all.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from .._errors import ConfigurationError, ToolError
from .._safeguards import Safeguards
from .._tool import Tool
from ._common import Declarations

__all__ = ["Bridge", "hand_over", "running", "shared_guards"]

E = TypeVar("E")

# How to run the framework's tool once, for the invocation in flight.
_RUN: contextvars.ContextVar[Callable[[], Any] | None] = contextvars.ContextVar(
    "toolspan_framework_run", default=None
)


def _dispatch(**_arguments: Any) -> Any:
    """The function of every bridged tool: one run of the framework's own tool.

    The arguments the executor validated are the ones the framework already
    holds (and may have parsed into richer types), so the framework's run
    uses its own copy; read-backs get the executor's JSON arguments.
    """
    run = _RUN.get()
    if run is None:
        raise ConfigurationError("a framework tool was called outside its toolspan adapter")
    return run()


@contextmanager
def running(run: Callable[[], Any]) -> Iterator[None]:
    """Within the block, every attempt of the executor calls ``run()``.

    A context variable, so concurrent invocations (threads or asyncio tasks)
    each see their own run.
    """
    token = _RUN.set(run)
    try:
        yield
    finally:
        _RUN.reset(token)


def hand_over(exc: BaseException, seen: list[BaseException]) -> ToolError:
    """A framework's control flow raised by its tool, carried through the executor.

    Not a failure of the tool: a deferral, an approval request, a graph
    interrupt, a request that the model retry. The attempt ends with the
    non-retryable code ``control_flow`` (so a write's key is released, not
    left unknown as after a crash), and the adapter re-raises the exception
    in ``seen`` once the executor has returned: the framework goes on as it
    would without the boundary.
    """
    seen.append(exc)
    return ToolError("control_flow", f"{type(exc).__name__}: handed back to the framework")


def shared_guards(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with one set of in-memory guards for every executor built from
    them (a bridge builds one per tool), unless the application gave ``safeguards``:
    a check tool's success and a loop are then seen across the tools."""
    if "safeguards" in options:
        return options
    return {**options, "safeguards": Safeguards.in_memory()}


class Bridge(Generic[E]):
    """Framework tool definitions → toolspan tools and their executors, built once each.

    ``build`` makes an executor (sync or async, with the application's
    options) for a list of tools. A definition that changes (another schema
    or description under the same name) gets a new executor.
    """

    __slots__ = ("_build", "_executors", "declarations")

    def __init__(self, declarations: Declarations, build: Callable[[Sequence[Tool]], E]) -> None:
        self.declarations = declarations
        self._build = build
        self._executors: dict[str, tuple[Mapping[str, Any] | None, str, E]] = {}

    def executor(self, name: str, parameters: Mapping[str, Any] | None, description: str) -> E:
        """The executor for the framework tool ``name`` with this schema and description."""
        cached = self._executors.get(name)
        if (
            cached is not None
            and (cached[0] is parameters or cached[0] == parameters)
            and cached[1] == description
        ):
            return cached[2]
        tool = self.declarations.tool(
            name, _dispatch, parameters=parameters, description=description
        )
        executor = self._build([tool])
        self._executors[name] = (parameters, description, executor)
        return executor
