"""Compacting a long transcript: old tool results become one line of state each.

In a long session every raw tool result stays in the history the model is
sent, turn after turn. :func:`compact_transcript` keeps the last
``keep_last`` tool calls as they are and replaces everything older with a
short state message, one line per logical action ("refund_order
order_id=R-441 status=succeeded"), so the model still knows what happened
without re-reading every payload.

The provider APIs pair every tool result with the call that asked for it,
so a call and its result are always dropped together: an OpenAI ``tool``
message answers a ``tool_calls`` entry of an earlier assistant message, a
Responses ``function_call_output`` answers a ``function_call`` item, an
Anthropic ``tool_result`` block answers a ``tool_use`` block of the
assistant message just before it. Failures are never lost: a logical action
whose history holds a failure keeps those statuses on its line even when a
later call of it succeeded.

Messages may be plain dicts or the SDKs' pydantic objects; the input is
never mutated (changed messages are copies, untouched ones are passed
through).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ._canonical import canonical_json
from ._redact import Redactor

__all__ = ["STATE_PREFIX", "TranscriptShape", "compact_transcript"]

TranscriptShape = Literal["openai", "responses", "anthropic"]

# The first line of every state message; a later compaction folds earlier
# state messages into its own, so there is only ever one.
STATE_PREFIX = "[toolspan state] earlier tool calls, one line per action:"

_KEY_ARGS = 3  # arguments shown per line: enough to name the action
_VALUE_CHARS = 40
_REDACTOR = Redactor()
_ASSISTANT_FIELDS = frozenset({"role", "content", "name", "tool_calls", "refusal", "audio"})


@dataclass
class _Action:
    """One logical action: the same tool with the same arguments."""

    line_head: str
    statuses: list[str] = field(default_factory=list)

    def line(self) -> str:
        final = self.statuses[-1] if self.statuses else "unknown"
        earlier = [s for s in self.statuses[:-1] if s != "succeeded"]
        text = f"{self.line_head} status={final}"
        if earlier:
            text += f" (earlier: {', '.join(earlier)})"
        return text


# Where a call or a result sits: (kind, message index, its rank among the
# calls or results of that message). Ids may repeat across turns, positions do not.
_Place = tuple[str, int, int]


@dataclass(frozen=True)
class _Call:
    """One tool call and its result, and where each sits in the transcript."""

    call_id: str
    tool: str
    arguments: Any
    result: Any
    is_error: bool
    answered_at: _Place
    asked_at: _Place


def compact_transcript(
    messages: Sequence[Any], *, keep_last: int, shape: TranscriptShape
) -> list[Any]:
    """A new message list with tool results older than the last ``keep_last`` calls compacted.

    Each dropped call and its result are replaced, together, by one line per
    logical action (tool, key arguments, final status) in a single state
    message, placed where the last dropped result was: ``role: system`` for
    ``"openai"`` and ``"responses"``, a text block of the user turn for
    ``"anthropic"`` (which has no system role inside messages).
    """
    if keep_last < 0:
        raise ValueError("keep_last must be >= 0")
    if shape not in ("openai", "responses", "anthropic"):
        raise ValueError(f"unknown transcript shape {shape!r}")
    plain = [_as_dict(m) for m in messages]
    calls = _find_calls(plain, shape)
    dropped_calls = calls[: max(0, len(calls) - keep_last)]
    if not dropped_calls:
        return list(messages)
    actions: dict[str, _Action] = {}
    for call in dropped_calls:
        _record(actions, call)
    lines = [*_prior_state(plain, shape), *(a.line() for a in actions.values())]
    state = "\n".join([STATE_PREFIX, *lines])
    dropped = {place for c in dropped_calls for place in (c.asked_at, c.answered_at)}
    at = max(c.answered_at[1] for c in dropped_calls)
    return _rebuild(messages, plain, shape, dropped, _state_position(plain, shape, at), state)


# --- reading the transcript --------------------------------------------------


def _as_dict(message: Any) -> dict[str, Any]:
    if isinstance(message, Mapping):
        return dict(message)
    dump = getattr(message, "model_dump", None)
    if dump is None:
        raise TypeError(f"not a message: {type(message).__name__}")
    dumped: dict[str, Any] = dump(exclude_none=True)
    return dumped


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return list(content) if isinstance(content, list) else []


def _find_calls(plain: list[dict[str, Any]], shape: TranscriptShape) -> list[_Call]:
    """Every answered tool call in order, with its result.

    A result answers the latest unanswered call of its id before it: ids may
    be reused across turns. An unanswered call is still in flight: never dropped.
    """
    asked: list[tuple[str, str, Any, _Place]] = []
    waiting: dict[str, list[int]] = {}
    answers: dict[int, tuple[Any, bool, _Place]] = {}
    for index, message in enumerate(plain):
        for rank, (call_id, tool, arguments) in enumerate(_calls_in(message, shape)):
            waiting.setdefault(call_id, []).append(len(asked))
            asked.append((call_id, tool, arguments, ("call", index, rank)))
        for rank, (call_id, result, is_error) in enumerate(_results_in(message, shape)):
            open_calls = waiting.get(call_id)
            if open_calls:  # a result for no call is left where it is
                answers[open_calls.pop()] = (result, is_error, ("result", index, rank))
    return [
        _Call(call_id, tool, arguments, *answers[n], asked_at=place)
        for n, (call_id, tool, arguments, place) in enumerate(asked)
        if n in answers
    ]


def _calls_in(message: Mapping[str, Any], shape: TranscriptShape) -> Iterator[tuple[str, str, Any]]:
    if shape == "openai":
        if message.get("role") == "assistant":
            for entry in message.get("tool_calls") or ():
                function = _field(entry, "function") or {}
                yield (
                    str(_field(entry, "id")),
                    str(_field(function, "name")),
                    _field(function, "arguments"),
                )
    elif shape == "responses":
        if message.get("type") == "function_call":
            yield str(message.get("call_id")), str(message.get("name")), message.get("arguments")
    elif message.get("role") == "assistant":
        for block in _blocks(message):
            if _field(block, "type") == "tool_use":
                yield str(_field(block, "id")), str(_field(block, "name")), _field(block, "input")


def _results_in(
    message: Mapping[str, Any], shape: TranscriptShape
) -> Iterator[tuple[str, Any, bool]]:
    if shape == "openai":
        if message.get("role") == "tool":
            yield str(message.get("tool_call_id")), message.get("content"), False
    elif shape == "responses":
        if message.get("type") == "function_call_output":
            yield str(message.get("call_id")), message.get("output"), False
    elif message.get("role") == "user":
        for block in _blocks(message):
            if _field(block, "type") == "tool_result":
                yield (
                    str(_field(block, "tool_use_id")),
                    _field(block, "content"),
                    bool(_field(block, "is_error", False)),
                )


def _prior_state(plain: list[dict[str, Any]], shape: TranscriptShape) -> list[str]:
    """The lines of earlier state messages, kept verbatim and first."""
    lines: list[str] = []
    for message in plain:
        text = _state_text(message, shape)
        if text is not None:
            lines.extend(text.splitlines()[1:])
    return lines


def _state_text(message: Mapping[str, Any], shape: TranscriptShape) -> str | None:
    if shape == "anthropic":
        for block in _blocks(message):
            text = _field(block, "text")
            if _field(block, "type") == "text" and str(text).startswith(STATE_PREFIX):
                return str(text)
        return None
    content = message.get("content")
    if message.get("role") == "system" and isinstance(content, str):
        return content if content.startswith(STATE_PREFIX) else None
    return None


# --- the state lines ---------------------------------------------------------


def _record(actions: dict[str, _Action], call: _Call) -> None:
    arguments = _parse(call.arguments)
    identity = f"{call.tool}\x00{canonical_json(arguments).decode()}"
    action = actions.get(identity)
    if action is None:
        action = actions[identity] = _Action(line_head=_line_head(call.tool, arguments))
    action.statuses.append(_status(call))


def _parse(arguments: Any) -> Any:
    if isinstance(arguments, str | bytes):
        try:
            return orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
    return arguments if arguments is not None else {}


def _line_head(tool: str, arguments: Any) -> str:
    if not isinstance(arguments, Mapping):
        return tool
    # Ids name the action best ("order_id=R-441"); then any other scalars.
    redacted = _REDACTOR.value(dict(arguments))
    scalars = [(k, v) for k, v in redacted.items() if isinstance(v, str | int | float | bool)]
    scalars.sort(key=lambda kv: (not str(kv[0]).endswith("id"), str(kv[0])))
    shown = " ".join(f"{k}={_short(v)}" for k, v in scalars[:_KEY_ARGS])
    return f"{tool} {shown}" if shown else tool


def _short(value: Any) -> str:
    text = str(value).replace("\n", " ")
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _status(call: _Call) -> str:
    """toolspan's final status when the result is toolspan's JSON, else ok/error."""
    text = call.result
    if isinstance(text, list):  # Anthropic content blocks
        text = "".join(str(_field(b, "text", "")) for b in text)
    if isinstance(text, str):
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, Mapping) and isinstance(body.get("status"), str):
            status = str(body["status"])
            code = body.get("error_code")
            return f"{status}/{code}" if code and status != "succeeded" else status
    return "error" if call.is_error else "succeeded"


# --- writing the new transcript ----------------------------------------------


def _rebuild(
    originals: Sequence[Any],
    plain: list[dict[str, Any]],
    shape: TranscriptShape,
    dropped: set[_Place],
    at: int,
    state: str,
) -> list[Any]:
    out: list[Any] = []
    for index, (original, message) in enumerate(zip(originals, plain, strict=True)):
        if shape != "anthropic" and _state_text(message, shape) is not None:
            continue  # folded into the new state message
        kept = _without(original, message, index, shape, dropped)
        if index == at and shape == "anthropic":
            kept = _with_state_block(kept, state)
        if kept is not None:
            out.append(kept)
        if index == at and shape != "anthropic":
            out.append({"role": "system", "content": state})
    return out


def _state_position(plain: list[dict[str, Any]], shape: TranscriptShape, at: int) -> int:
    """Index of the message after which (or, for Anthropic, in which) the state goes.

    That is the last dropped result (``at``), moved past any tool results that
    follow it: OpenAI wants a call's ``tool`` messages right after its assistant
    message, with nothing in between.
    """
    if shape != "anthropic":
        while at + 1 < len(plain) and next(_results_in(plain[at + 1], shape), None) is not None:
            at += 1
    return at


def _without(
    original: Any, message: dict[str, Any], index: int, shape: TranscriptShape, dropped: set[_Place]
) -> Any:
    """The message minus the dropped calls and results (and, for Anthropic, an
    earlier state block); ``None`` when nothing is left."""
    if shape == "responses":
        places = {("call", index, 0), ("result", index, 0)}
        return None if places & dropped else original
    if shape == "openai":
        if message.get("role") == "tool":
            return None if ("result", index, 0) in dropped else original
        entries = message.get("tool_calls") or []
        kept = [e for rank, e in enumerate(entries) if ("call", index, rank) not in dropped]
        if len(kept) == len(entries):
            return original
        if not kept and not message.get("content"):
            return None
        # Only the fields a request takes (a response's message has more).
        copy = {k: v for k, v in message.items() if k in _ASSISTANT_FIELDS}
        if kept:
            copy["tool_calls"] = kept
        else:
            copy.pop("tool_calls", None)
        return copy
    blocks = _blocks(message)
    kept = list(_anthropic_blocks(message, index, dropped))
    if len(kept) == len(blocks):
        return original
    if not kept:
        return None
    return {**message, "content": kept}


def _anthropic_blocks(message: dict[str, Any], index: int, dropped: set[_Place]) -> Iterator[Any]:
    """The blocks of an Anthropic message that stay: not dropped, not an earlier state."""
    role = message.get("role")
    kind = "call" if role == "assistant" else "result"
    wanted = "tool_use" if role == "assistant" else "tool_result"
    rank = 0
    for block in _blocks(message):
        block_type = _field(block, "type")
        if block_type == wanted:
            rank += 1
            if (kind, index, rank - 1) in dropped:
                continue
        elif block_type == "text" and str(_field(block, "text")).startswith(STATE_PREFIX):
            continue  # folded into the new state block
        yield block


def _with_state_block(kept: Any, state: str) -> dict[str, Any]:
    """The Anthropic user turn with the state appended as a text block.

    Appended, not prepended: ``tool_result`` blocks must open their turn.
    """
    text = {"type": "text", "text": state}
    if kept is None:
        return {"role": "user", "content": [text]}
    message = _as_dict(kept)
    return {**message, "content": [*_blocks(message), text]}
