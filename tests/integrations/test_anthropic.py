"""The Anthropic adapter through the real SDK client (httpx2.MockTransport as the model)."""

from __future__ import annotations

import json

from anthropic.types import ToolUseBlock

from examples.agent import Planned, Request
from examples.scripted_api import MODEL, ScriptedAPI
from toolspan.tracer import Safeguards, ToolError
from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.integrations import anthropic as ts_anthropic
from toolspan.tracer.store import MemoryStore

SKU = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
DEFINITIONS = [
    {"name": "check_inventory", "description": "Stock level.", "input_schema": SKU},
    {"name": "reserve_item", "input_schema": SKU},
]


def test_tool_results_go_back_through_the_sdk_with_is_error_on_failures(make_executor, spans):
    checks: list[str] = []
    reservations: list[str] = []

    def check_inventory(sku: str) -> dict:
        checks.append(sku)
        if len(checks) == 1:
            raise ToolError.from_status(429)
        return {"sku": sku, "in_stock": 3}

    def reserve_item(sku: str) -> dict:
        reservations.append(sku)
        raise ToolError.from_status(400, "unknown sku")

    declarations = Declarations({"check_inventory": Declaration.read()})
    tools = ts_anthropic.tools_from_definitions(
        DEFINITIONS,
        {"check_inventory": check_inventory, "reserve_item": reserve_item},
        declarations,
    )
    executor = make_executor(tools, safeguards=Safeguards(store=MemoryStore()))
    turn = [
        Planned("check_inventory", {"sku": "BELL"}),
        Planned("reserve_item", {"sku": "BELL"}),
        Planned("reserve_item", {"quantity": 2}),
    ]
    model = ScriptedAPI("anthropic", [Request("help", [turn])])
    client = model.anthropic_client()
    specs = [ts_anthropic.tool_spec(t) for t in tools]
    messages: list = [{"role": "user", "content": "help"}]
    message = client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=specs)
    assert all(isinstance(block, ToolUseBlock) for block in message.content)
    messages.append({"role": "assistant", "content": message.content})
    messages.append(
        ts_anthropic.answer(
            executor, message, conversation_id="cv", request_id="r1", declarations=declarations
        )
    )
    final = client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=specs)
    assert final.content[0].text == "Done."

    sent = model.bodies[-1]
    assert sent["tools"][0] == {
        "name": "check_inventory",
        "description": "Stock level.",
        "input_schema": SKU,
    }
    asked = [b["id"] for b in sent["messages"][1]["content"]]
    results = sent["messages"][2]
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == asked
    flags = [(b["is_error"], json.loads(b["content"])["status"]) for b in results["content"]]
    assert flags == [(False, "succeeded"), (True, "permanent_error"), (True, "invalid_arguments")]
    ok = json.loads(results["content"][0]["content"])
    assert (ok["attempts"], ok["data"]) == (2, {"sku": "BELL", "in_stock": 3})
    assert reservations == ["BELL"]  # the call with bad arguments never ran
    assert {s.attributes["gen_ai.tool.call.id"] for s in spans.calls()} == set(asked)


def test_tool_calls_of_a_message_or_its_blocks():
    model = ScriptedAPI("anthropic", [Request("x", [[Planned("check_inventory", {"sku": "A"})]])])
    message = model.anthropic_client().messages.create(model=MODEL, max_tokens=8, messages=[])
    from_message = ts_anthropic.tool_calls(message, conversation_id="cv")
    assert ts_anthropic.tool_calls(message.content, conversation_id="cv") == from_message
    assert ts_anthropic.tool_calls(message.model_dump(), conversation_id="cv") == from_message
    assert [(c.name, c.arguments) for c in from_message] == [("check_inventory", {"sku": "A"})]


def test_the_async_client_and_executor_take_the_same_blocks():
    import asyncio

    import anthropic
    import httpx2

    from toolspan.tracer import AsyncExecutor

    async def check_inventory(sku: str) -> dict:
        raise ToolError.from_status(404, "no such sku")

    tools = ts_anthropic.tools_from_definitions(
        DEFINITIONS[:1],
        {"check_inventory": check_inventory},
        {"check_inventory": Declaration.read()},
    )
    executor = AsyncExecutor(tools)
    model = ScriptedAPI("anthropic", [Request("x", [[Planned("check_inventory", {"sku": "Q"})]])])

    async def run() -> dict:
        client = anthropic.AsyncAnthropic(
            api_key="k",
            base_url="http://model.invalid",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model.handle)),
        )
        messages: list = [{"role": "user", "content": "x"}]
        message = await client.messages.create(model=MODEL, max_tokens=8, messages=messages)
        messages.append({"role": "assistant", "content": message.content})
        messages.append(await ts_anthropic.answer_async(executor, message, conversation_id="c"))
        await client.messages.create(model=MODEL, max_tokens=8, messages=messages)
        return model.bodies[-1]["messages"][-1]

    (block,) = asyncio.run(run())["content"]
    assert block["is_error"] is True
    assert json.loads(block["content"])["error_code"] == "http_404"
