"""compact_transcript after every turn of a growing session, with call ids the
model reuses across turns and a call still in flight: the pairing the APIs
require holds, and every dropped call has its state line."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolspan.tracer import compact_transcript
from toolspan.tracer._transcript import TranscriptShape

from .test_transcript import _SDK_TYPES, SHAPES, _assert_pairing, _state_lines, _turn, _user

_STATUSES = ["succeeded", "unsafe_retry", "permanent_error"]
# A turn: its calls as (id, status); ids come from a small pool, so turns reuse them.
_batch = st.lists(
    st.tuples(st.sampled_from(["call_a", "call_b", "call_c"]), st.sampled_from(_STATUSES)),
    min_size=1,
    max_size=3,
    unique_by=lambda call: call[0],
)


def _calls(turn: int, batch: list[tuple[str, str]]) -> list[tuple[str, str, dict[str, Any], str]]:
    # Every call is its own logical action (its order id), so each has its own line.
    return [
        (cid, "refund_order", {"order_id": f"{turn}-{n}"}, s) for n, (cid, s) in enumerate(batch)
    ]


def _in_flight(shape: TranscriptShape, calls: list[tuple[str, str, dict[str, Any], str]]) -> list:
    asked = _turn(shape, calls)
    return asked[: len(calls)] if shape == "responses" else asked[:1]


def _answered_part(shape: TranscriptShape, out: list[Any], flying: int) -> list[Any]:
    return out[: len(out) - flying]


@settings(max_examples=200, deadline=None)
@given(
    shape=st.sampled_from(SHAPES),
    turns=st.lists(_batch, min_size=1, max_size=8),
    keep_last=st.integers(0, 4),
    in_flight=st.booleans(),
)
def test_compacting_after_every_turn_keeps_pairs_and_every_dropped_call(
    shape: TranscriptShape, turns: list[Any], keep_last: int, in_flight: bool
) -> None:
    messages: list[Any] = [_user(shape, "start")]
    answered: list[tuple[str, str, dict[str, Any], str]] = []
    for t, batch in enumerate(turns[:-1] if in_flight else turns):
        calls = _calls(t, batch)
        answered.extend(calls)
        messages = compact_transcript(
            [*messages, *_turn(shape, calls)], keep_last=keep_last, shape=shape
        )
        _assert_pairing(shape, messages)
        _SDK_TYPES[shape].validate_python(messages)
        dropped = answered[: max(0, len(answered) - keep_last)]
        lines = _state_lines(shape, messages)
        assert len(lines) == len(dropped), (lines, dropped)
        for _cid, tool, args, status in dropped:
            line = f"{tool} order_id={args['order_id']} status={status}"
            assert any(found.split("/")[0] == line for found in lines), (line, lines)
    if not in_flight:
        return
    flying = _calls(len(turns) - 1, turns[-1])
    asked = _in_flight(shape, flying)
    out = compact_transcript([*messages, *asked], keep_last=keep_last, shape=shape)
    # The calls in flight stay as they are, at the end, and no line speaks of them.
    assert out[len(out) - len(asked) :] == asked
    _assert_pairing(shape, _answered_part(shape, out, len(asked)))
    orders = {args["order_id"] for _, _, args, _ in flying}
    assert not any(
        line.split()[1].removeprefix("order_id=") in orders for line in _state_lines(shape, out)
    )


def test_reused_ids_drop_only_the_older_call_and_never_one_in_flight() -> None:
    # The case: call_a answered in two turns, then asked again (in flight).
    for shape in SHAPES:
        first = _calls(0, [("call_a", "permanent_error")])
        second = _calls(1, [("call_a", "succeeded")])
        flying = _calls(2, [("call_a", "succeeded")])
        messages = [
            _user(shape, "start"),
            *_turn(shape, first),
            *_turn(shape, second),
            *_in_flight(shape, flying),
        ]
        out = compact_transcript(messages, keep_last=1, shape=shape)
        lines = _state_lines(shape, out)
        assert lines == ["refund_order order_id=0-0 status=permanent_error/http_404"], shape
        text = repr(out)
        assert "1-0" in text and "2-0" in text, (
            shape
        )  # the newer answered call and the one in flight


def test_the_turn_holding_the_state_keeps_its_tool_results() -> None:
    # Anthropic: the state block sits in the user turn of the last dropped result;
    # the next compaction must drop only that block, not the results beside it.
    shape: TranscriptShape = "anthropic"
    messages: list[Any] = [_user(shape, "start")]
    for t in range(4):
        messages += _turn(shape, _calls(t, [("call_a", "succeeded"), ("call_b", "succeeded")]))
        messages = compact_transcript(messages, keep_last=3, shape=shape)
        _assert_pairing(shape, messages)
    assert len(_state_lines(shape, messages)) == 8 - 3
