"""The shared declarations: what an adapter builds from a framework's tool definition."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolspan.tracer import ConfigurationError, Safeguards, Tool, ToolError, ToolResult
from toolspan.tracer.integrations import Declaration, Declarations, model_reply
from toolspan.tracer.store import MemoryStore, derive_key

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}


def by_order(args):
    return str(args["order_id"])


def test_an_undeclared_tool_is_a_write_that_is_never_repeated_blind(make_executor, spans):
    attempts = []

    def send(order_id: str) -> None:
        attempts.append(order_id)
        raise TimeoutError

    tool = Declarations().tool("send_note", send, parameters=SCHEMA, description="Send.")
    assert (tool.side_effect, tool.idempotent, tool.description) == ("write", False, "Send.")
    call = Declarations().tool_call(
        "send_note", "c1", '{"order_id": "A-1"}', conversation_id="cv", request_id="r1"
    )
    assert call.idempotency_key is None
    result = make_executor([tool]).execute(call)
    assert (result.status, result.error_code, attempts) == (
        "unsafe_retry",
        "unknown_outcome",
        ["A-1"],
    )


def test_a_declared_read_is_retried(make_executor):
    answers = iter([ToolError("http_503"), {"ok": 1}])

    def get(order_id: str):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    declarations = Declarations({"get": Declaration.read()})
    tool = declarations.tool("get", get, parameters=SCHEMA)
    result = make_executor([tool]).execute(
        declarations.tool_call("get", "c1", {"order_id": "A-1"}, conversation_id="cv")
    )
    assert (result.status, result.attempts, result.data) == ("succeeded", 2, {"ok": 1})


def test_keys_follow_the_request_and_step_not_the_call_id():
    declarations = Declarations(
        {
            "refund": Declaration.write(
                idempotent=True, key_passed="scripted", resource_key=by_order
            ),
            "charge": Declaration.write(idempotent=True, key_passed="scripted"),
            "note": Declaration.write(
                idempotent=True, key_passed="scripted", step=lambda a: f"note-{a['n']}"
            ),
            "fixed": Declaration.write(idempotent=True, key_passed="scripted", step="the-step"),
            "email": Declaration.write(),
            "get": Declaration.read(),
        },
        namespace="shop",
    )
    first = declarations.tool_call(
        "refund", "c1", '{"order_id": "A-1"}', conversation_id="x", request_id="r1"
    )
    replanned = declarations.tool_call(
        "refund", "c9", {"order_id": "A-1"}, conversation_id="x", request_id="r1"
    )
    assert first.idempotency_key == replanned.idempotency_key
    assert first.idempotency_key == derive_key("r1", "refund:A-1", namespace="shop")
    assert declarations.key("charge", {}, "r1") == derive_key("r1", "charge", namespace="shop")
    assert declarations.key("note", {"n": 3}, "r1") == derive_key("r1", "note-3", namespace="shop")
    assert declarations.key("fixed", "not json", "r1") == derive_key(
        "r1", "the-step", namespace="shop"
    )
    assert declarations.key("refund", {"order_id": "A-2"}, "r1") != first.idempotency_key
    # No key: reads, unkeyed writes, no request id, arguments the step cannot read.
    assert declarations.key("get", {"order_id": "A-1"}, "r1") is None
    assert declarations.key("email", {}, "r1") is None
    assert declarations.key("refund", {"order_id": "A-1"}, "") is None
    assert declarations.key("refund", "{not json", "r1") is None
    assert declarations.key("refund", {"other": 1}, "r1") is None
    assert declarations.key("refund", "[1, 2]", "r1") is None


def test_a_keyed_write_is_retried_and_runs_once(make_executor):
    effects: list[str] = []
    seen: dict[str, dict] = {}

    def refund(order_id: str):
        from toolspan.tracer import current_call

        key = current_call().idempotency_key
        if key not in seen:
            effects.append(order_id)
            seen[key] = {"refund": order_id}
            raise TimeoutError  # committed, response lost
        return seen[key]

    declarations = Declarations(
        {"refund": Declaration.write(idempotent=True, key_passed="scripted")}
    )
    executor = make_executor(
        [declarations.tool("refund", refund, parameters=SCHEMA)],
        safeguards=Safeguards(store=MemoryStore()),
    )
    call = declarations.tool_call(
        "refund", "c1", {"order_id": "A-1"}, conversation_id="cv", request_id="r1"
    )
    result = executor.execute(call)
    assert (result.status, result.attempts, effects) == ("succeeded", 2, ["A-1"])
    again = executor.execute(declarations.keyed(call))
    assert again.replayed and effects == ["A-1"]


def test_keyed_keeps_a_key_the_application_set():
    declarations = Declarations(
        {"refund": Declaration.write(idempotent=True, key_passed="scripted")}
    )
    call = Declarations().tool_call("refund", "c", {}, conversation_id="x", request_id="r")
    keyed = declarations.keyed(call)
    assert keyed.idempotency_key == derive_key("r", "refund")
    from dataclasses import replace

    mine = replace(call, idempotency_key="mine")
    assert declarations.keyed(mine) is mine


def test_from_tools_carries_what_the_tools_say():
    tools = [
        Tool(
            "refund",
            lambda: None,
            side_effect="write",
            idempotent=True,
            key_passed="scripted",
            resource_key=by_order,
        ),
        Tool("get", lambda: None),
    ]
    declarations = Declarations.from_tools(tools)
    assert declarations.key("refund", {"order_id": "A-1"}, "r") == derive_key("r", "refund:A-1")
    assert declarations.get("get").side_effect == "none"
    assert "get" in declarations and "other" not in declarations


def test_bad_declarations_are_refused_at_declaration_time():
    with pytest.raises(ConfigurationError, match="only for idempotent writes"):
        Declaration.write(step="x")
    with pytest.raises(ConfigurationError, match=r"Declaration\.read"):
        Declarations({"get": "read"})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="read_back is for writes"):
        Declarations({"get": Declaration(side_effect="none", read_back=print)}).tool("get", print)


def test_with_fallback_prefers_what_the_application_declared():
    declarations = Declarations({"get": Declaration.read()})
    hinted = Declaration.write(idempotent=True, key_passed="scripted")
    assert declarations.with_fallback("get", hinted).side_effect == "none"
    assert declarations.with_fallback("other", hinted) is hinted
    assert declarations.with_fallback("other", None) == Declaration()


def test_model_reply_marks_every_failure_as_an_error():
    ok = ToolResult(ok=True, status="succeeded", tool="t", call_id="c", data={"x": 1}, attempts=1)
    failed = ToolResult(
        ok=False,
        status="unsafe_retry",
        tool="t",
        call_id="c",
        error_code="unknown_outcome",
        attempts=1,
    )
    assert model_reply(ok).is_error is False and model_reply(ok).data == {"x": 1}
    reply = model_reply(failed)
    assert reply.is_error and reply.data is None
    assert (
        reply.payload["status"] == "unsafe_retry" and '"error_code":"unknown_outcome"' in reply.text
    )
    assert reply.text == failed.to_json()


@given(st.text(min_size=1), st.text(min_size=1), st.text(min_size=1))
def test_the_same_action_gets_the_same_key_whatever_the_call_id(request_id, step, call_id):
    declarations = Declarations(
        {"w": Declaration.write(idempotent=True, key_passed="scripted", step=lambda a: step)}
    )
    try:
        expected = derive_key(request_id, step)
    except ValueError:
        return  # names derive_key refuses (e.g. control characters) are covered in its tests
    call = declarations.tool_call("w", call_id, {}, conversation_id="c", request_id=request_id)
    assert call.idempotency_key == expected


def test_the_executors_a_framework_bridge_builds_share_one_set_of_guards():
    """One executor per framework tool: without a store, they keep their guards together."""
    from toolspan.tracer import Safeguards
    from toolspan.tracer.integrations.langchain import RetryBoundaryMiddleware

    middleware = RetryBoundaryMiddleware({"a": Declaration.read(), "b": Declaration.read()})
    sync_a = middleware._sync.executor("a", None, "")
    async_b = middleware._async.executor("b", None, "")
    assert sync_a._core.safeguards is async_b._core.safeguards is not None
    given = Safeguards.in_memory()
    explicit = RetryBoundaryMiddleware({"a": Declaration.read()}, safeguards=given)
    assert explicit._sync.executor("a", None, "")._core.safeguards is given
    off = RetryBoundaryMiddleware({"a": Declaration.read()}, safeguards=None)
    assert off._sync.executor("a", None, "")._core.safeguards is None
