"""The OpenAI adapter through the real SDK client (httpx2.MockTransport as the model).

What the adapter returns goes into the SDK's next request unchanged; the
assertions are on the JSON body the SDK actually sent.
"""

from __future__ import annotations

import asyncio
import json

import httpx2
import openai
import pytest

from examples.agent import Planned, Request
from examples.scripted_api import MODEL, ScriptedAPI
from toolspan.tracer import ConfigurationError, Executor, Safeguards, Tool, ToolError, current_call
from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.integrations import openai as ts_openai
from toolspan.tracer.store import MemoryStore, derive_key

ORDER = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}
DEFINITIONS = [
    {
        "type": "function",
        "function": {"name": "get_order", "description": "Look up.", "parameters": ORDER},
    },
    {"type": "function", "function": {"name": "cancel_order", "parameters": ORDER}},
]
TURN = [Planned("get_order", {"order_id": "A-1"}), Planned("cancel_order", {"order_id": "A-1"})]


class Shop:
    def __init__(self) -> None:
        self.reads = 0
        self.cancels: list[str | None] = []

    def get_order(self, order_id: str) -> dict:
        self.reads += 1
        if self.reads == 1:
            raise ToolError.from_status(503)
        return {"order_id": order_id, "status": "shipped"}

    def cancel_order(self, order_id: str) -> dict:
        self.cancels.append(current_call().idempotency_key)
        raise TimeoutError  # sent; the answer never came


def tools(shop: Shop, declarations: Declarations) -> list[Tool]:
    functions = {"get_order": shop.get_order, "cancel_order": shop.cancel_order}
    return ts_openai.tools_from_definitions(DEFINITIONS, functions, declarations)


@pytest.fixture
def executor(make_executor):
    def build(shop: Shop, declarations: Declarations) -> Executor:
        return make_executor(tools(shop, declarations), safeguards=Safeguards(store=MemoryStore()))

    return build


def test_chat_results_go_back_through_the_sdk_as_tool_messages(executor, spans):
    shop = Shop()
    run = executor(shop, Declarations({"get_order": Declaration.read()}))
    model = ScriptedAPI("chat", [Request("help", [TURN])])
    client = model.openai_client()
    messages: list = [{"role": "user", "content": "help"}]
    completion = client.chat.completions.create(model=MODEL, messages=messages)
    messages.append(completion.choices[0].message)
    messages += ts_openai.answer_chat(run, completion, conversation_id="cv", request_id="r1")
    final = client.chat.completions.create(model=MODEL, messages=messages)
    assert final.choices[0].message.content == "Done."

    sent = model.bodies[-1]["messages"]
    asked = [c["id"] for c in sent[1]["tool_calls"]]
    answers = {m["tool_call_id"]: json.loads(m["content"]) for m in sent if m["role"] == "tool"}
    assert list(answers) == asked
    read, cancel = (answers[call_id] for call_id in asked)
    assert (read["status"], read["attempts"], read["data"]["status"]) == ("succeeded", 2, "shipped")
    # Undeclared, so a write without a key: sent once, never repeated blind.
    assert (cancel["ok"], cancel["status"], cancel["attempts"]) == (False, "unsafe_retry", 1)
    assert shop.cancels == [None]
    ids = {
        span.attributes["gen_ai.tool.name"]: span.attributes["gen_ai.tool.call.id"]
        for span in spans.calls()
    }
    assert ids == dict(zip(["get_order", "cancel_order"], asked, strict=True))


def test_responses_function_calls_are_answered_with_function_call_outputs(executor, spans):
    shop = Shop()
    declarations = Declarations(
        {
            "get_order": Declaration.read(),
            "cancel_order": Declaration.write(idempotent=True, key_passed="scripted"),
        }
    )
    run = executor(shop, declarations)
    model = ScriptedAPI("responses", [Request("help", [TURN])])
    client = model.openai_client()
    items: list = [{"role": "user", "content": "help"}]
    response = client.responses.create(model=MODEL, input=items)
    items += response.output
    items += ts_openai.answer_response(
        run, response, conversation_id="cv", request_id="r1", declarations=declarations
    )
    final = client.responses.create(model=MODEL, input=items)
    assert final.output_text == "Done."

    sent = model.bodies[-1]["input"]
    calls = [i for i in sent if i.get("type") == "function_call"]
    outputs = {
        i["call_id"]: json.loads(i["output"])
        for i in sent
        if i.get("type") == "function_call_output"
    }
    assert list(outputs) == [c["call_id"] for c in calls]
    assert outputs[calls[0]["call_id"]]["status"] == "succeeded"
    # Keyed: the lost answers are retried under one key (the service dedups on it).
    cancel = outputs[calls[1]["call_id"]]
    assert cancel["attempts"] == 4 and cancel["status"] == "attempt_limit"
    assert set(shop.cancels) == {derive_key("r1", "cancel_order")}
    assert {s.attributes["gen_ai.tool.call.id"] for s in spans.calls()} == set(outputs)


def test_the_model_sees_the_tool_definitions_it_was_given(executor):
    built = {t.name: t for t in tools(Shop(), Declarations())}
    assert built["get_order"].description == "Look up."
    assert [ts_openai.chat_tool_spec(t) for t in built.values()] == [
        {**d, "function": {"description": "", **d["function"]}} for d in DEFINITIONS
    ]
    spec = ts_openai.response_tool_spec(built["get_order"])
    assert (spec["type"], spec["name"], spec["parameters"]) == ("function", "get_order", ORDER)


def test_tool_calls_of_a_completion_its_message_or_a_list(executor):
    model = ScriptedAPI("chat", [Request("help", [TURN])])
    completion = model.openai_client().chat.completions.create(model=MODEL, messages=[])
    ids = {"conversation_id": "cv", "request_id": "r1"}
    whole = ts_openai.chat_tool_calls(completion, **ids)
    message = completion.choices[0].message
    assert ts_openai.chat_tool_calls(message, **ids) == whole
    assert ts_openai.chat_tool_calls(message.tool_calls, **ids) == whole
    assert ts_openai.chat_tool_calls(message.model_dump(), **ids) == whole
    assert [c.name for c in whole] == ["get_order", "cancel_order"]
    declared = Declarations(
        {"cancel_order": Declaration.write(idempotent=True, key_passed="scripted")}
    )
    keyed = ts_openai.chat_tool_calls(completion, declarations=declared, **ids)
    assert [c.idempotency_key for c in keyed] == [None, derive_key("r1", "cancel_order")]


def test_the_async_client_and_executor_take_the_same_results():
    from toolspan.tracer import AsyncExecutor

    async def get_order(order_id: str) -> dict:
        return {"order_id": order_id}

    tools = ts_openai.tools_from_definitions(
        DEFINITIONS[:1], {"get_order": get_order}, {"get_order": Declaration.read()}
    )
    executor = AsyncExecutor(tools)
    turn = [Planned("get_order", {"order_id": "A-1"})]

    async def chat() -> list:
        model = ScriptedAPI("chat", [Request("help", [turn])])
        client = model.async_openai_client()
        messages: list = [{"role": "user", "content": "help"}]
        completion = await client.chat.completions.create(model=MODEL, messages=messages)
        messages.append(completion.choices[0].message)
        messages += await ts_openai.answer_chat_async(executor, completion, conversation_id="c")
        await client.chat.completions.create(model=MODEL, messages=messages)
        return model.bodies[-1]["messages"]

    async def responses() -> list:
        model = ScriptedAPI("responses", [Request("help", [turn])])
        client = openai.AsyncOpenAI(
            api_key="k",
            base_url="http://model.invalid/v1",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model.handle)),
        )
        response = await client.responses.create(model=MODEL, input="help")
        items = [*response.output]
        items += await ts_openai.answer_response_async(executor, response, conversation_id="c")
        await client.responses.create(model=MODEL, input=items)
        return model.bodies[-1]["input"]

    sent_chat = asyncio.run(chat())
    assert json.loads(sent_chat[-1]["content"])["data"] == {"order_id": "A-1"}
    sent_items = asyncio.run(responses())
    assert sent_items[-1]["type"] == "function_call_output"
    assert json.loads(sent_items[-1]["output"])["status"] == "succeeded"


def test_a_definition_without_its_function_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="get_order"):
        ts_openai.tools_from_definitions(DEFINITIONS, {})
