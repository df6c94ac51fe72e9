"""The result's ``next`` object, and writes never repeated blind after an unknown outcome."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from toolspan.tracer import ConfigurationError, Executor, Safeguards, Tool, ToolCall, ToolError
from toolspan.tracer.store import IdempotencyStore, MemoryStore, SQLiteStore
from toolspan.tracer.testing import FakeClock

from ..redis_server import RedisServer
from .conftest import Scripted, Spans


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.slow)])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[IdempotencyStore]:
    made: IdempotencyStore
    if request.param == "memory":
        made = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "guards.sqlite")
    else:
        from toolspan.tracer.store import RedisStore

        server = request.getfixturevalue("redis_server")
        made = RedisStore(server.url, prefix=f"t-{uuid.uuid4().hex}:")
    yield made
    made.close()


def _executor(spans: Spans, tools: list[Tool], store: IdempotencyStore | None) -> Executor:
    clock = FakeClock()
    return Executor(
        tools,
        tracer_provider=spans.provider,
        sleep=clock.sleep,
        clock=clock,
        rng=random.Random(0),
        safeguards=None if store is None else Safeguards(store=store),
    )


def _call(
    name: str, arguments: dict[str, Any], call_id: str, conversation: str = "conv"
) -> ToolCall:
    return ToolCall(name, call_id, arguments, conversation_id=conversation, request_id=call_id)


SMS = {"to": "+4712345678", "text": "your refund is on its way"}


def _sms_tools(send: Scripted, status: Scripted | None = None) -> list[Tool]:
    return [
        Tool("send_sms", send, side_effect="write", check_with="get_sms_status"),
        Tool("get_sms_status", status or Scripted({"sent": False})),
    ]


def test_an_unknown_outcome_names_the_check_tool(spans: Spans, store: IdempotencyStore) -> None:
    executor = _executor(spans, _sms_tools(Scripted(TimeoutError())), store)
    result = executor.execute(_call("send_sms", SMS, "c1"))
    assert (result.status, result.error_code) == ("unsafe_retry", "unknown_outcome")
    assert result.next is not None and result.next.tools == ("get_sms_status",)
    body = result.to_dict()
    assert body["next"]["tools"] == ["get_sms_status"]
    assert "do not repeat this write" in body["next"]["instruction"]
    assert spans.attrs(spans.call())["toolspan.next.tools"] == ("get_sms_status",)


def test_the_repeat_waits_for_the_check_then_runs(spans: Spans, store: IdempotencyStore) -> None:
    send = Scripted(TimeoutError(), {"sms_id": "s1"})
    executor = _executor(spans, _sms_tools(send), store)
    executor.execute(_call("send_sms", SMS, "c1"))

    refused = executor.execute(_call("send_sms", SMS, "c2"))
    assert (refused.ok, refused.status, refused.retryable, refused.attempts) == (
        False,
        "read_back_required",
        True,
        0,
    )
    assert refused.next is not None and refused.next.tools == ("get_sms_status",)
    assert len(send.calls) == 1  # nothing executed
    # Other arguments, or another conversation, are another action.
    other = dict(SMS, text="another message")
    assert executor.execute(_call("send_sms", other, "c3")).ok
    assert executor.execute(_call("send_sms", SMS, "c4", conversation="elsewhere")).status == (
        "succeeded"
    )
    # A check in another conversation does not count here.
    executor.execute(_call("get_sms_status", {"to": SMS["to"]}, "c5", conversation="elsewhere"))
    assert executor.execute(_call("send_sms", SMS, "c6")).status == "read_back_required"

    assert executor.execute(_call("get_sms_status", {"to": SMS["to"]}, "c7")).ok
    again = executor.execute(_call("send_sms", SMS, "c8"))
    assert again.ok and again.attempts == 1
    # Recorded, so the analyzer sees the repeat was checked before it ran.
    assert spans.attrs(spans.calls()[-1])["toolspan.read_back"] == "checked"
    statuses = [spans.attrs(s)["toolspan.status"] for s in spans.calls()]
    assert statuses.count("read_back_required") == 2


def test_a_tool_with_a_read_back_reads_back_instead_of_refusing(
    spans: Spans, store: IdempotencyStore
) -> None:
    send = Scripted(TimeoutError(), {"sms_id": "s1"})
    # The read-back fails the first time (so the outcome stays unknown), then finds it.
    answers = iter([ConnectionError("status service down"), {"sms_id": "s0"}])

    def read_back(**_: Any) -> Any:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    tools = [Tool("send_sms", send, side_effect="write", read_back=read_back)]
    executor = _executor(spans, tools, store)
    first = executor.execute(_call("send_sms", SMS, "c1"))
    assert first.error_code == "unknown_outcome"
    second = executor.execute(_call("send_sms", SMS, "c2"))
    assert second.ok and second.reconciled and second.attempts == 0
    assert len(send.calls) == 1
    assert spans.attrs(spans.calls()[-1])["toolspan.read_back"] == "found"


def test_without_a_check_tool_the_repeat_stays_refused(
    spans: Spans, store: IdempotencyStore
) -> None:
    send = Scripted(TimeoutError(), {"ok": 1})
    executor = _executor(spans, [Tool("send_sms", send, side_effect="write")], store)
    first = executor.execute(_call("send_sms", SMS, "c1"))
    assert first.next is not None and first.next.tools == ()
    assert "tell the user" in first.next.instruction
    refused = executor.execute(_call("send_sms", SMS, "c2"))
    assert refused.status == "read_back_required" and "no check tool" in refused.message


def test_semantic_failures_list_the_next_tools(spans: Spans) -> None:
    lookup = Tool(
        "get_order",
        Scripted(ToolError.from_status(404)),
        parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
        next_tools=["search_orders"],
    )
    search = Tool("search_orders", Scripted([]))
    executor = _executor(spans, [lookup, search], None)
    missing = executor.execute(_call("get_order", {"order_id": "R-1"}, "c1"))
    assert missing.status == "permanent_error" and missing.next is not None
    assert missing.next.tools == ("search_orders",)
    assert "repair the arguments" in missing.next.instruction
    invalid = executor.execute(_call("get_order", {"order_id": 7}, "c2"))
    assert invalid.status == "invalid_arguments"
    assert invalid.next is not None and invalid.next.tools == ("search_orders",)


def test_a_retryable_stop_says_when(spans: Spans) -> None:
    busy = Tool("get_quote", Scripted(ToolError.from_status(429, retry_after_s=30.0)))
    result = _executor(spans, [busy], None).execute(_call("get_quote", {}, "c1"))
    assert result.status == "wait_budget" and result.next is not None
    assert "after 30 s" in result.next.instruction and result.next.tools == ()


def test_success_has_no_next(spans: Spans) -> None:
    result = _executor(spans, [Tool("ping", Scripted({"pong": 1}))], None).execute(
        _call("ping", {}, "c1")
    )
    assert result.next is None and "next" not in result.to_dict()
    assert "toolspan.next.tools" not in spans.attrs(spans.call())


def test_tools_named_by_check_with_or_next_tools_must_exist() -> None:
    send = Tool("send_sms", Scripted({}), side_effect="write", check_with="list_sms")
    lookup = Tool("get_order", Scripted({}), next_tools=["get_order", "search_orders"])
    with pytest.raises(ConfigurationError) as caught:
        Executor([send, lookup])
    message = str(caught.value)
    assert "'list_sms'" in message and "'send_sms', 'get_order'" in message
    with pytest.raises(ConfigurationError, match="'search_orders'"):
        Executor([lookup])
    Executor([send, lookup, Tool("list_sms", Scripted()), Tool("search_orders", Scripted())])


def test_an_unknown_tool_is_told_the_tools_that_exist(spans: Spans) -> None:
    tools = [Tool("get_order", Scripted({})), Tool("track_shipment", Scripted({}))]
    result = _executor(spans, tools, None).execute(_call("get_ordr", {}, "c1"))
    assert result.status == "unknown_tool" and result.next is not None
    assert result.next.tools == ("get_order", "track_shipment")
    assert result.to_dict()["next"]["tools"] == ["get_order", "track_shipment"]
