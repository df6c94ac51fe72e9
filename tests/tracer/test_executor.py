"""The executor end to end through the public API, with the real SDK."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
import random

import httpx
import pytest
from opentelemetry.trace import StatusCode

from toolspan.tracer import (
    AsyncExecutor,
    ConfigurationError,
    Tool,
    ToolCall,
    ToolError,
    ToolResult,
    canonical_json,
    raise_for_httpx_status,
    tool,
)
from toolspan.tracer.testing import FakeClock

from .conftest import Scripted

READ_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}


def call(name="weather", args=None, key=None, call_id="call_1"):
    return ToolCall(
        name,
        call_id,
        {"city": "Oslo"} if args is None else args,
        conversation_id="conv-1",
        request_id="req-1",
        turn_id="turn-1",
        idempotency_key=key,
    )


def test_success_first_try_spans_follow_the_contract(make_executor, spans):
    fake = Scripted({"temp_c": 3})
    result = make_executor([Tool("weather", fake, parameters=READ_SCHEMA)]).execute(call())
    assert (result.ok, result.status, result.data, result.attempts) == (
        True,
        "succeeded",
        {"temp_c": 3},
        1,
    )
    call_span, (attempt,) = spans.call(), spans.attempts()
    assert call_span.name == "execute_tool weather" and attempt.name == "attempt 1 weather"
    assert attempt.parent.span_id == call_span.context.span_id
    a = spans.attrs(call_span)
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.type"] == "function"
    assert a["gen_ai.conversation.id"] == "conv-1"
    assert a["toolspan.request.id"] == "req-1" and a["toolspan.turn.id"] == "turn-1"
    assert a["gen_ai.tool.call.arguments"] == '{"city":"Oslo"}'
    assert a["toolspan.args.hash"] == hashlib.sha256(b'{"city":"Oslo"}').hexdigest()
    assert a["toolspan.result.hash"] == hashlib.sha256(b'{"temp_c":3}').hexdigest()
    assert (a["toolspan.status"], a["toolspan.attempts"], a["toolspan.total_wait_s"]) == (
        "succeeded",
        1,
        0.0,
    )
    assert a["toolspan.side_effect"] == "none" and a["toolspan.idempotency.replayed"] is False
    assert "toolspan.error_code" not in a
    assert call_span.status.status_code == StatusCode.OK
    b = spans.attrs(attempt)
    assert (
        b["toolspan.attempt"],
        b["http.request.resend_count"],
        b["toolspan.attempt.outcome"],
    ) == (1, 0, "ok")
    assert b["gen_ai.tool.call.id"] == "call_1" and b["toolspan.retry.delay_s"] == 0.0


def test_retry_then_success_records_each_attempt(make_executor, spans, clock):
    fake = Scripted(ToolError.from_status(503), ToolError("timeout"), {"ok": 1})
    result = make_executor([Tool("weather", fake)]).execute(call())
    assert (result.status, result.attempts, len(fake.calls)) == ("succeeded", 3, 3)
    assert result.total_wait_s == round(sum(clock.slept), 2) and len(clock.slept) == 2
    first, second, third = spans.attempts()
    assert first.status.status_code == StatusCode.ERROR
    assert spans.attrs(first)["toolspan.attempt.outcome"] == "http_503"
    assert spans.attrs(first)["http.response.status_code"] == 503
    assert spans.attrs(first)["toolspan.retry.delay_s"] == clock.slept[0]
    assert spans.attrs(second)["toolspan.retry.elapsed_wait_s"] == clock.slept[0]
    assert spans.attrs(third)["toolspan.retry.initiator"] == "orchestrator"
    assert "toolspan.retry.initiator" not in spans.attrs(first)
    assert spans.call().status.status_code == StatusCode.OK  # succeeded after retries


def test_permanent_error_is_not_retried(make_executor, spans):
    fake = Scripted(ToolError.from_status(404, "no such city"), {"never": True})
    result = make_executor([Tool("weather", fake)]).execute(call())
    assert (result.status, result.error_code, result.retryable, result.data) == (
        "permanent_error",
        "http_404",
        False,
        None,
    )
    assert len(fake.calls) == 1
    a = spans.attrs(spans.call())
    assert a["toolspan.error_code"] == "http_404" and a["http.response.status_code"] == 404
    assert spans.call().status.status_code == StatusCode.ERROR


def test_write_without_key_is_never_repeated_and_outcome_is_unknown(make_executor):
    fake = Scripted(ToolError("timeout"), {"charged": True})
    pay = Tool("pay", fake, side_effect="write", idempotent=True, key_passed="scripted")
    # No request id: the executor cannot derive the key (see test_keys_and_runs.py).
    keyless = dataclasses.replace(call("pay", {"amount": 5}), request_id="")
    result = make_executor([pay]).execute(keyless)
    assert (result.status, result.error_code, result.retryable) == (
        "unsafe_retry",
        "unknown_outcome",
        False,
    )
    assert len(fake.calls) == 1


def test_unambiguous_failure_of_unkeyed_write_keeps_its_code(make_executor):
    fake = Scripted(ToolError.from_status(429), {"charged": True})
    pay = Tool("pay", fake, side_effect="write")
    result = make_executor([pay]).execute(
        call("pay", {"amount": 5}, key="k1")
    )  # tool not idempotent
    assert (result.status, result.error_code) == ("unsafe_retry", "http_429")
    assert len(fake.calls) == 1


def test_keyed_write_is_retried_with_the_same_key(make_executor, spans):
    fake = Scripted(ToolError("timeout"), {"charged": True})
    pay = Tool("pay", fake, side_effect="write", idempotent=True, key_passed="scripted")
    result = make_executor([pay]).execute(call("pay", {"amount": 5}, key="order-7"))
    assert (result.status, result.attempts) == ("succeeded", 2)
    for span in spans.all():
        assert spans.attrs(span)["toolspan.idempotency.key"] == "order-7"
        assert spans.attrs(span)["toolspan.side_effect"] == "write"


@pytest.mark.parametrize(
    "arguments, expected",
    [
        ('{"city": ', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({"days": 3}, "missing required field(s) 'city'"),
        ({"city": 7}, "city: must match type 'string'"),
        ({"city": "Oslo", "days": 0}, "days: fails minimum 1"),
        ({"city": "Oslo", "extra": "sk-live-secret"}, "unexpected field"),
    ],
)
def test_invalid_arguments_name_the_field_and_run_nothing(
    make_executor, spans, arguments, expected
):
    fake = Scripted({"never": True})
    result = make_executor([Tool("weather", fake, parameters=READ_SCHEMA)]).execute(
        call(args=arguments)
    )
    assert (result.status, result.retryable, result.attempts) == ("invalid_arguments", False, 0)
    assert expected in result.message
    assert "sk-live" not in result.message  # values are never echoed
    assert fake.calls == [] and spans.attempts() == []
    assert spans.attrs(spans.call())["toolspan.status"] == "invalid_arguments"


def test_all_failing_fields_are_named(make_executor):
    result = make_executor([Tool("weather", Scripted(1), parameters=READ_SCHEMA)]).execute(
        call(args={"city": 1, "days": "x"})
    )
    assert "city:" in result.message and "days:" in result.message


def test_json_string_arguments_hash_like_the_dict(make_executor, spans):
    executor = make_executor([Tool("weather", Scripted({"ok": 1}), parameters=READ_SCHEMA)])
    executor.execute(call(args='{ "days": 2, "city": "Oslo" }'))
    executor.execute(call(args={"city": "Oslo", "days": 2}))
    first, second = (spans.attrs(s)["toolspan.args.hash"] for s in spans.calls())
    assert first == second


def test_hash_key_gives_hmac_of_unredacted_arguments(make_executor, spans):
    executor = make_executor([Tool("login", Scripted({"ok": 1}))], hash_key="k")
    executor.execute(call("login", {"user": "a", "password": "p1"}))
    executor.execute(call("login", {"user": "a", "password": "p2"}))
    first, second = (spans.attrs(s)["toolspan.args.hash"] for s in spans.calls())
    assert first != second  # the redacted forms are equal; the fingerprints are not
    raw = canonical_json({"user": "a", "password": "p1"})
    assert first == hmac.new(b"k", raw, hashlib.sha256).hexdigest()


def test_unknown_tool(make_executor, spans):
    result = make_executor([Tool("weather", Scripted(1))]).execute(call("wether"))
    assert (result.status, result.error_code, result.ok) == ("unknown_tool", "unknown_tool", False)
    assert spans.call().name == "execute_tool wether"


def test_result_schema_blocks_malformed_data(make_executor, spans):
    weather = Tool(
        "weather",
        Scripted({"temp_c": "warm"}),
        result_schema={"type": "object", "properties": {"temp_c": {"type": "number"}}},
    )
    result = make_executor([weather]).execute(call())
    assert (result.status, result.data, result.ok) == ("invalid_response", None, False)
    assert "warm" not in result.to_json()
    assert spans.attrs(spans.attempts()[0])["toolspan.attempt.outcome"] == "invalid_response"


def test_large_results_are_truncated_and_flagged(make_executor, spans):
    result = make_executor(
        [Tool("weather", Scripted({"rows": ["x" * 100] * 1000}))], max_result_bytes=1024
    ).execute(call())
    assert result.ok and result.truncated and len(result.data.encode()) <= 1024
    assert json.loads(result.to_json())["truncated"] is True
    assert spans.attrs(spans.call())["toolspan.result.truncated"] is True


def test_programming_errors_propagate_unretried_and_are_recorded(make_executor, spans):
    fake = Scripted(KeyError("station"), {"ok": 1})
    with pytest.raises(KeyError):
        make_executor([Tool("weather", fake)]).execute(call())
    assert len(fake.calls) == 1
    for span in (spans.call(), spans.attempts()[0]):
        assert span.status.status_code == StatusCode.ERROR
        assert span.events[0].name == "exception"
        assert spans.attrs(span)["error.type"] == "KeyError"


def test_builtin_timeout_and_connection_errors_are_mapped(make_executor):
    fake = Scripted(TimeoutError(), ConnectionResetError(), {"ok": 1})
    policy_tool = Tool("weather", fake, retryable_codes=frozenset({"timeout", "connection_error"}))
    result = make_executor([policy_tool]).execute(call())
    assert (result.status, result.attempts) == ("succeeded", 3)


def test_httpx_status_and_transport_errors_via_a_transport_fake(make_executor):
    answers = iter(
        [
            httpx.Response(503, headers={"Retry-After": "2"}),
            httpx.ReadTimeout("slow"),
            httpx.Response(200, json={"temp_c": 4}),
        ]
    )

    def handler(request: httpx.Request) -> httpx.Response:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://weather.test")

    def weather(city: str) -> object:
        return raise_for_httpx_status(client.get("/now", params={"city": city}))

    result = make_executor([Tool("weather", weather)]).execute(call())
    assert (result.status, result.attempts, result.data) == ("succeeded", 3, {"temp_c": 4})
    assert result.total_wait_s >= 2.0


def test_retry_after_that_does_not_fit_is_reported(make_executor):
    result = make_executor(
        [Tool("weather", Scripted(ToolError.from_status(429, retry_after_s=12)))]
    ).execute(call())
    assert (result.status, result.retry_after_s, result.retryable, result.attempts) == (
        "wait_budget",
        12,
        True,
        1,
    )


def test_read_back_settles_an_ambiguous_unkeyed_write(make_executor, spans):
    charges: list[int] = []

    def pay(amount: int) -> dict:
        charges.append(amount)
        raise TimeoutError  # committed, response lost

    found = Tool("pay", pay, side_effect="write", read_back=lambda amount: {"charged": amount})
    result = make_executor([found]).execute(call("pay", {"amount": 5}))
    assert (result.status, result.reconciled, result.data, len(charges)) == (
        "succeeded",
        True,
        {"charged": 5},
        1,
    )
    assert spans.attrs(spans.call())["toolspan.reconciled"] is True
    assert spans.attrs(spans.call())["toolspan.read_back"] == "found"


def test_read_back_absent_allows_exactly_one_more_run(make_executor):
    fake = Scripted(ToolError("timeout"), ToolError("timeout"), ToolError("timeout"), {"ok": 1})
    reads: list[int] = []

    def read_back(amount: int) -> None:
        reads.append(amount)
        return None  # the effect is not there

    # commit_window_s=0: a service that never acts on a request after it answered.
    pay = Tool("pay", fake, side_effect="write", read_back=read_back, commit_window_s=0)
    result = make_executor([pay]).execute(call("pay", {"amount": 5}))
    assert result.status == "succeeded" and len(fake.calls) == 4 and len(reads) == 3


def test_failed_read_back_leaves_the_outcome_unknown(make_executor):
    def broken(amount: int) -> None:
        raise ConnectionError("status API down")

    fake = Scripted(ToolError("timeout"), {"ok": 1})
    pay = Tool("pay", fake, side_effect="write", read_back=broken)
    result = make_executor([pay]).execute(call("pay", {"amount": 5}))
    assert (result.status, result.error_code, len(fake.calls)) == (
        "unsafe_retry",
        "unknown_outcome",
        1,
    )


def test_failing_hooks_and_exporters_never_break_the_call(make_executor, spans):
    class Broken:
        def on_attempt(self, event):
            raise RuntimeError("metrics backend down")

        def on_call(self, event):
            raise RuntimeError("metrics backend down")

    class FailingExporter:
        def export(self, batch):
            raise OSError("disk full")

        def shutdown(self):
            return None

        def force_flush(self, timeout_millis=0):
            return True

    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    spans.provider.add_span_processor(SimpleSpanProcessor(FailingExporter()))
    result = make_executor([Tool("weather", Scripted({"ok": 1}))], hooks=[Broken()]).execute(call())
    assert result.ok


def test_message_shapes_for_openai_and_anthropic(make_executor):
    executor = make_executor([Tool("weather", Scripted({"temp_c": 3}), parameters=READ_SCHEMA)])
    openai_call = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
    }
    result = executor.execute(ToolCall.from_openai(openai_call, conversation_id="c"))
    message = result.to_openai_message()
    assert message["role"] == "tool" and message["tool_call_id"] == "call_9"
    assert json.loads(message["content"])["data"] == {"temp_c": 3}
    block = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}
    answer = executor.execute(
        ToolCall.from_anthropic(block, conversation_id="c")
    ).to_anthropic_block()
    assert (answer["type"], answer["tool_use_id"], answer["is_error"]) == (
        "tool_result",
        "toolu_1",
        False,
    )


def test_failure_renders_without_data(make_executor):
    result = make_executor([Tool("weather", Scripted(ToolError.from_status(400)))]).execute(call())
    body = json.loads(result.to_json())
    assert "data" not in body and body["ok"] is False and body["status"] == "permanent_error"
    assert result.to_anthropic_block()["is_error"] is True


def test_declaration_errors():
    with pytest.raises(ConfigurationError):
        Tool("x", print, side_effect="delete")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Tool("x", print, idempotent=True)
    with pytest.raises(ConfigurationError):
        Tool("x", print, parameters={"type": "nonsense"})


def test_decorator_declares_a_tool():
    @tool(
        side_effect="write", idempotent=True, key_passed="scripted", parameters={"type": "object"}
    )
    def refund(order_id: str) -> dict:
        """Refund an order."""
        return {"refunded": order_id}

    assert (refund.name, refund.side_effect, refund.description) == (
        "refund",
        "write",
        "Refund an order.",
    )
    assert refund.openai_schema()["function"]["name"] == "refund"
    assert refund.anthropic_schema()["input_schema"] == {"type": "object"}


def test_async_executor_retries_with_a_non_blocking_sleep(spans):
    clock = FakeClock()
    attempts: list[int] = []

    async def weather(city: str) -> dict:
        attempts.append(1)
        if len(attempts) < 3:
            raise ToolError.from_status(502)
        return {"temp_c": 1}

    executor = AsyncExecutor(
        [Tool("weather", weather)],
        tracer_provider=spans.provider,
        sleep=clock.async_sleep,
        clock=clock,
        rng=random.Random(1),
    )
    result = asyncio.run(executor.execute(call()))
    assert (result.status, result.attempts, len(clock.slept)) == ("succeeded", 3, 2)
    assert len(spans.attempts()) == 3


def test_deadline_stops_before_a_wait_that_would_pass_it(make_executor, clock):
    def slow(city: str) -> None:
        clock.advance(1.8)  # the tool itself took 1.8 s
        raise ToolError("timeout")

    from toolspan.tracer import RetryPolicy

    result = make_executor([Tool("weather", slow)], policy=RetryPolicy(deadline_s=2.0)).execute(
        call()
    )
    assert (result.status, result.attempts, result.retryable) == ("deadline_exceeded", 1, True)


def test_fast_built_results_are_real_frozen_tool_results():
    import dataclasses
    import pickle

    from toolspan.tracer._result import build_result

    fields = dict(
        ok=True,
        status="succeeded",
        tool="t",
        call_id="c",
        error_code=None,
        retryable=False,
        data={"a": [1]},
        message="ok",
        attempts=2,
        total_wait_s=0.5,
        retry_after_s=None,
        truncated=False,
        replayed=True,
        reconciled=False,
    )
    fast = build_result(**fields)
    assert type(fast) is ToolResult and fast == ToolResult(**fields)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.ok = False
    assert pickle.loads(pickle.dumps(fast)) == fast
    assert dataclasses.replace(fast, attempts=3).attempts == 3
