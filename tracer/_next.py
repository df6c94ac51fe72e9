"""What the model may do next after a result: the ``next`` object.

A failure the model cannot act on invites guessing: repeating a write whose
effect is unknown, or retrying a 404 as if waiting could fix it. So every
result that is not a plain success says, in one instruction and a list of
tool names, what the model should do now:

* an **unknown outcome** of a write: call the tool's ``check_with`` tool and
  do not repeat the write until it reports (the executor enforces this with
  ``read_back_required``);
* a **semantic failure** (invalid arguments, 4xx other than 408/429): repair
  the named fields once, or use one of the tool's ``next_tools``;
* a **retryable stop**: when to try again (``retry_after_s`` when the server
  said so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._result import RETRYABLE_STATUSES

if TYPE_CHECKING:
    from ._tool import Tool

__all__ = ["Next", "next_step"]

_NOT_SEMANTIC = frozenset({"http_408", "http_429"})
# The retryable stops (read_back_required is answered by the unknown-outcome branch
# first), plus the turn budget: not retryable within this request, but a later one
# gets a fresh budget.
_RETRY_LATER = RETRYABLE_STATUSES | {"turn_budget"}


@dataclass(frozen=True, slots=True)
class Next:
    """What the model should do after this result: an instruction and the tools for it."""

    instruction: str
    tools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The ``next`` object the model sees."""
        return {"instruction": self.instruction, "tools": list(self.tools)}


def next_step(
    tool: Tool | None,
    status: str,
    error_code: str | None,
    retry_after_s: float | None = None,
) -> Next | None:
    """The ``next`` object for a result, or ``None`` when there is nothing to say."""
    if status == "succeeded":
        return None
    if error_code == "unknown_outcome" or status == "read_back_required":
        return _after_unknown(tool, retry_after_s)
    if status == "invalid_arguments" or (
        status == "permanent_error"
        and error_code is not None
        and error_code.startswith("http_4")
        and error_code not in _NOT_SEMANTIC
    ):
        tools = tuple(tool.next_tools) if tool is not None else ()
        alternatives = " or use one of the listed tools" if tools else ""
        return Next(
            "waiting will not fix this: repair the arguments the message names once"
            f"{alternatives}; do not repeat the same call",
            tools,
        )
    if status in _RETRY_LATER:
        when = f"after {retry_after_s:g} s" if retry_after_s is not None else "later"
        return Next(f"try the same call again {when}, or tell the user it is unavailable")
    if status == "quarantined":
        return Next(
            "stop: this call was quarantined after a finding; do not repeat it, "
            "tell the user what happened and ask how to go on"
        )
    if status == "loop_blocked":
        return Next("stop repeating this call: change the arguments or answer the user")
    return None


def _after_unknown(tool: Tool | None, pending_s: float | None = None) -> Next:
    check = tool.check_with if tool is not None else None
    if pending_s is not None:
        # The read-back found nothing, but the service may still commit the request.
        how = f"call {check}" if check else "make the same call again (it is read back first)"
        return Next(
            "the write may still be committing at its service: do not repeat it now; "
            f"after {pending_s:g} s {how} to learn whether it happened",
            (check,) if check else (),
        )
    if check is None:
        return Next(
            "the write may or may not have happened: do not repeat it; "
            "tell the user the outcome is unknown"
        )
    return Next(
        f"the write may or may not have happened: call {check} to learn whether it did, "
        "and do not repeat this write until it reports",
        (check,),
    )
