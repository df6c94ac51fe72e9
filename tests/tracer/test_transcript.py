"""compact_transcript: old tool results become state lines, pairing stays valid."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pydantic
import pytest
from anthropic.types import MessageParam, TextBlock, ToolUseBlock
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)
from openai.types.responses import ResponseInputParam

from toolspan.tracer import ToolResult, compact_transcript
from toolspan.tracer._transcript import STATE_PREFIX, TranscriptShape

SHAPES: tuple[TranscriptShape, ...] = ("openai", "responses", "anthropic")
_SDK_TYPES: dict[str, Any] = {
    "openai": pydantic.TypeAdapter(list[ChatCompletionMessageParam]),
    "responses": pydantic.TypeAdapter(ResponseInputParam),
    "anthropic": pydantic.TypeAdapter(list[MessageParam]),
}

# --- building transcripts the way an agent loop does --------------------------


def _result(call_id: str, tool: str, status: str) -> ToolResult:
    ok = status == "succeeded"
    code = {"unsafe_retry": "unknown_outcome", "permanent_error": "http_404"}.get(status)
    return ToolResult(
        ok=ok, status=status, tool=tool, call_id=call_id, error_code=code,  # type: ignore[arg-type]
        data={"done": True} if ok else None, attempts=1,
    )  # fmt: skip


def _turn(shape: TranscriptShape, calls: list[tuple[str, str, dict[str, Any], str]]) -> list[Any]:
    """One assistant turn with its calls and the results toolspan produced."""
    results = [_result(cid, tool, status) for cid, tool, _, status in calls]
    if shape == "openai":
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": cid, "type": "function",
                     "function": {"name": tool, "arguments": _json(args)}}
                    for cid, tool, args, _ in calls
                ],
            },
            *(r.to_openai_message() for r in results),
        ]  # fmt: skip
    if shape == "responses":
        items: list[Any] = [
            {"type": "function_call", "call_id": cid, "name": tool, "arguments": _json(args)}
            for cid, tool, args, _ in calls
        ]
        return [*items, *(_output(r) for r in results)]
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": cid, "name": tool, "input": args}
                for cid, tool, args, _ in calls
            ],
        },
        {"role": "user", "content": [r.to_anthropic_block() for r in results]},
    ]


def _output(result: ToolResult) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": result.call_id, "output": result.to_json()}


def _json(args: dict[str, Any]) -> str:
    return orjson.dumps(args).decode()


def _user(shape: TranscriptShape, text: str) -> dict[str, Any]:
    if shape == "anthropic":
        return {"role": "user", "content": [{"type": "text", "text": text}]}
    return {"role": "user", "content": text}


# --- what a provider API requires -------------------------------------------


def _plain(value: Any) -> Any:
    """Dicts all the way down (SDK objects may sit inside plain messages)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(exclude_none=True)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _assert_pairing(shape: TranscriptShape, messages: list[Any]) -> None:
    plain = [_plain(m) for m in messages]
    if shape == "openai":
        for i, m in enumerate(plain):
            if m.get("role") == "tool":
                j = i - 1
                while plain[j].get("role") == "tool":
                    j -= 1
                asked = {c["id"] for c in plain[j].get("tool_calls") or []}
                assert plain[j]["role"] == "assistant" and m["tool_call_id"] in asked, (i, m)
            for call in m.get("tool_calls") or []:
                following = []
                for n in plain[i + 1 :]:
                    if n.get("role") != "tool":
                        break
                    following.append(n["tool_call_id"])
                assert call["id"] in following, (i, call)
    elif shape == "responses":
        seen: set[str] = set()
        answered = {m["call_id"] for m in plain if m.get("type") == "function_call_output"}
        for m in plain:
            if m.get("type") == "function_call":
                seen.add(m["call_id"])
                assert m["call_id"] in answered
            if m.get("type") == "function_call_output":
                assert m["call_id"] in seen
    else:
        for i, m in enumerate(plain):
            blocks = m["content"] if isinstance(m["content"], list) else []
            results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
            if results:
                assert blocks[: len(results)] == [b for b in blocks if b["type"] == "tool_result"]
                prev = plain[i - 1]
                asked = [b["id"] for b in prev["content"] if b["type"] == "tool_use"]
                assert prev["role"] == "assistant" and set(results) == set(asked), (i, m)
            if m["role"] == "assistant" and any(b["type"] == "tool_use" for b in blocks):
                nxt = plain[i + 1]["content"]
                assert {b["id"] for b in blocks if b["type"] == "tool_use"} <= {
                    b.get("tool_use_id") for b in nxt
                }


def _state_lines(shape: TranscriptShape, messages: list[Any]) -> list[str]:
    lines: list[str] = []
    for m in messages:
        texts = (
            [b.get("text", "") for b in m["content"] if isinstance(b, dict)]
            if shape == "anthropic" and isinstance(m.get("content"), list)
            else [m.get("content")]
        )
        for text in texts:
            if isinstance(text, str) and text.startswith(STATE_PREFIX):
                lines.extend(text.splitlines()[1:])
    return lines


# --- examples -----------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_old_results_become_one_line_per_action(shape: TranscriptShape) -> None:
    messages = [
        _user(shape, "refund order R-441"),
        *_turn(shape, [("c1", "get_order", {"order_id": "R-441"}, "succeeded")]),
        *_turn(
            shape, [("c2", "refund_order", {"order_id": "R-441", "amount": 12}, "unsafe_retry")]
        ),
        *_turn(shape, [("c3", "get_refund_status", {"order_id": "R-441"}, "succeeded")]),
        *_turn(shape, [("c4", "refund_order", {"order_id": "R-441", "amount": 12}, "succeeded")]),
        _user(shape, "thanks"),
    ]
    before = copy.deepcopy(messages)
    out = compact_transcript(messages, keep_last=1, shape=shape)
    assert messages == before  # never mutated
    lines = _state_lines(shape, out)
    assert lines == [
        "get_order order_id=R-441 status=succeeded",
        "refund_order order_id=R-441 amount=12 status=unsafe_retry/unknown_outcome",
        "get_refund_status order_id=R-441 status=succeeded",
    ]
    # The last call (c4) and its result are untouched; c1-c3 are gone.
    text = repr(out)
    assert "c4" in text and not any(f"'{c}'" in text for c in ("c1", "c2", "c3"))
    _assert_pairing(shape, out)
    _SDK_TYPES[shape].validate_python(out)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_failure_stays_on_the_line_after_a_later_success(shape: TranscriptShape) -> None:
    refund = {"order_id": "R-9"}
    messages = [
        *_turn(shape, [("a", "refund_order", refund, "unsafe_retry")]),
        *_turn(shape, [("b", "refund_order", refund, "succeeded")]),
        *_turn(shape, [("c", "get_order", {"order_id": "R-9"}, "succeeded")]),
    ]
    out = compact_transcript(messages, keep_last=1, shape=shape)
    assert _state_lines(shape, out) == [
        "refund_order order_id=R-9 status=succeeded (earlier: unsafe_retry/unknown_outcome)"
    ]


@pytest.mark.parametrize("shape", SHAPES)
def test_nothing_to_drop_returns_the_same_messages(shape: TranscriptShape) -> None:
    messages = _turn(shape, [("a", "get_order", {"order_id": "1"}, "succeeded")])
    assert compact_transcript(messages, keep_last=5, shape=shape) == messages


def test_a_batch_split_by_keep_last_keeps_openai_pairing() -> None:
    messages = _turn(
        "openai",
        [
            ("a", "get_order", {"order_id": "1"}, "succeeded"),
            ("b", "get_order", {"order_id": "2"}, "succeeded"),
            ("c", "get_order", {"order_id": "3"}, "permanent_error"),
        ],
    )
    out = compact_transcript(messages, keep_last=2, shape="openai")
    assert [m["role"] for m in out] == ["assistant", "tool", "tool", "system"]
    assert [c["id"] for c in out[0]["tool_calls"]] == ["b", "c"]
    _assert_pairing("openai", out)


def test_secrets_in_arguments_stay_out_of_the_state() -> None:
    messages = [
        *_turn("openai", [("a", "login", {"user_id": "u1", "password": "hunter2"}, "succeeded")]),
        *_turn("openai", [("b", "get_order", {"order_id": "1"}, "succeeded")]),
    ]
    out = compact_transcript(messages, keep_last=1, shape="openai")
    assert "hunter2" not in repr(out)


def test_sdk_objects_are_accepted_and_not_mutated() -> None:
    call = ChatCompletionMessageFunctionToolCall(
        id="call_1",
        type="function",
        function={"name": "get_order", "arguments": '{"order_id":"7"}'},
    )
    assistant = ChatCompletionMessage(role="assistant", content=None, tool_calls=[call])
    second = ChatCompletionMessage(
        role="assistant",
        content=None,
        tool_calls=[call.model_copy(update={"id": "call_2"})],
    )
    messages: list[Any] = [
        assistant,
        _result("call_1", "get_order", "succeeded").to_openai_message(),
        second,
        _result("call_2", "get_order", "succeeded").to_openai_message(),
    ]
    out = compact_transcript(messages, keep_last=1, shape="openai")
    assert out[0]["role"] == "system" and out[1] is second
    assert assistant.tool_calls == [call]

    use = ToolUseBlock(type="tool_use", id="tu_1", name="get_order", input={"order_id": "7"})
    later = ToolUseBlock(type="tool_use", id="tu_2", name="get_order", input={"order_id": "8"})
    anthropic_messages: list[Any] = [
        {"role": "assistant", "content": [TextBlock(type="text", text="checking"), use]},
        {
            "role": "user",
            "content": [_result("tu_1", "get_order", "succeeded").to_anthropic_block()],
        },
        {"role": "assistant", "content": [later]},
        {
            "role": "user",
            "content": [_result("tu_2", "get_order", "succeeded").to_anthropic_block()],
        },
    ]
    out = compact_transcript(anthropic_messages, keep_last=1, shape="anthropic")
    _assert_pairing("anthropic", out)
    _SDK_TYPES["anthropic"].validate_python(out)
    assert [b["text"] for b in _plain(out[0])["content"]] == ["checking"]  # the tool_use is gone


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="keep_last"):
        compact_transcript([], keep_last=-1, shape="openai")
    with pytest.raises(ValueError, match="shape"):
        compact_transcript([], keep_last=1, shape="gemini")  # type: ignore[arg-type]


# --- properties ---------------------------------------------------------------

_STATUSES = ["succeeded", "succeeded", "unsafe_retry", "permanent_error", "attempt_limit"]
_call = st.tuples(
    st.sampled_from(["get_order", "refund_order", "send_email"]),
    st.fixed_dictionaries({"order_id": st.sampled_from(["1", "2", "3"])}),
    st.sampled_from(_STATUSES),
)
_transcripts = st.lists(
    st.tuples(st.lists(_call, min_size=1, max_size=3), st.booleans()), min_size=0, max_size=6
)


def _build(shape: TranscriptShape, turns: list[Any]) -> tuple[list[Any], list[tuple[str, ...]]]:
    messages: list[Any] = [_user(shape, "start")]
    calls: list[tuple[str, ...]] = []
    for t, (batch, user_between) in enumerate(turns):
        named = [(f"c{t}_{i}", tool, args, status) for i, (tool, args, status) in enumerate(batch)]
        calls.extend((cid, tool, args["order_id"], status) for cid, tool, args, status in named)
        messages.extend(_turn(shape, named))
        if user_between:
            messages.append(_user(shape, f"more {t}"))
    return messages, calls


@settings(max_examples=150, deadline=None)
@given(shape=st.sampled_from(SHAPES), turns=_transcripts, keep_last=st.integers(0, 8))
def test_pairing_failures_and_idempotence(
    shape: TranscriptShape, turns: list[Any], keep_last: int
) -> None:
    messages, calls = _build(shape, turns)
    before = copy.deepcopy(messages)
    out = compact_transcript(messages, keep_last=keep_last, shape=shape)
    assert messages == before
    _assert_pairing(shape, out)
    _SDK_TYPES[shape].validate_python(out)
    dropped = calls[: max(0, len(calls) - keep_last)]
    kept_ids = [c[0] for c in calls[len(dropped) :]]
    text = repr(out)
    assert all(f"'{cid}'" in text for cid in kept_ids)
    assert not any(f"'{c[0]}'" in text for c in dropped)
    lines = _state_lines(shape, out)
    for _cid, tool, order, status in dropped:
        if status != "succeeded":  # failed writes and unknown outcomes are never dropped
            assert any(
                line.startswith(f"{tool} order_id={order} ") and status in line for line in lines
            ), (tool, order, status, lines)
    assert len(lines) == len({(c[1], c[2]) for c in dropped})
    assert compact_transcript(out, keep_last=keep_last, shape=shape) == out
