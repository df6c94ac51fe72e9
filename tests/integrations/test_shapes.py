"""ToolCall.from_openai / from_anthropic read the SDKs' objects as well as dicts."""

from __future__ import annotations

from anthropic.types import ToolUseBlock
from openai.types.chat import ChatCompletionMessageFunctionToolCall
from openai.types.chat.chat_completion_message_custom_tool_call import (
    ChatCompletionMessageCustomToolCall,
)
from openai.types.responses import ResponseFunctionToolCall

from toolspan.tracer import Tool, ToolCall

CHAT = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_order", "arguments": '{"order_id": "A-1"}'},
}


def test_chat_completions_objects_and_dicts_give_the_same_call():
    as_object = ChatCompletionMessageFunctionToolCall.model_validate(CHAT)
    from_object = ToolCall.from_openai(as_object, conversation_id="c", request_id="r")
    assert from_object == ToolCall.from_openai(CHAT, conversation_id="c", request_id="r")
    assert (from_object.name, from_object.call_id, from_object.arguments) == (
        "get_order",
        "call_1",
        '{"order_id": "A-1"}',
    )


def test_responses_function_call_items_use_their_call_id():
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_7",
        "name": "get_order",
        "arguments": '{"order_id": "A-1"}',
        "status": "completed",
    }
    for shape in (item, ResponseFunctionToolCall.model_validate(item)):
        call = ToolCall.from_openai(shape, conversation_id="c")
        assert (call.name, call.call_id, call.arguments) == (
            "get_order",
            "call_7",
            '{"order_id": "A-1"}',
        )


def test_anthropic_tool_use_blocks_and_dicts_give_the_same_call():
    block = {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_id": "A"}}
    from_object = ToolCall.from_anthropic(ToolUseBlock.model_validate(block), conversation_id="c")
    assert from_object == ToolCall.from_anthropic(block, conversation_id="c")
    assert from_object.arguments == {"order_id": "A"}


def test_a_custom_tool_call_reaches_the_model_as_a_structured_refusal(make_executor):
    custom = ChatCompletionMessageCustomToolCall.model_validate(
        {"id": "call_2", "type": "custom", "custom": {"name": "get_order", "input": "A-1"}}
    )
    tool = Tool(
        "get_order",
        lambda order_id: order_id,
        parameters={"type": "object", "required": ["order_id"]},
    )
    result = make_executor([tool]).execute(ToolCall.from_openai(custom, conversation_id="c"))
    assert (result.status, result.call_id) == ("invalid_arguments", "call_2")
