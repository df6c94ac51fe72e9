"""The example agent on LangChain v1: `create_agent` (a LangGraph graph), a fake chat model.

    python -m examples.langchain_agent [--out out/langchain_agent.jsonl]

The agent loop is LangChain's ``create_agent``; the model is LangChain's own
``FakeMessagesListChatModel`` answering from the script, so it runs offline.
``RetryBoundaryMiddleware`` puts every tool call behind the boundary (for a
hand-built LangGraph graph, ``guarded_tool_node`` is the same as a
``ToolNode``). Then: ``toolspan analyze out/``.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool

from toolspan.tracer.integrations.langchain import RetryBoundaryMiddleware

from .frameworks import ANSWER, STEPS, USER, Example, main

__all__ = ["ScriptedChatModel", "run", "scripted_model"]


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, taking the tools an agent binds (it answers from a script)."""

    def bind_tools(
        self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self


def scripted_model() -> ScriptedChatModel:
    ids = itertools.count(1)
    turns: list[BaseMessage] = [
        AIMessage(
            "",
            tool_calls=[
                {"name": tool, "args": arguments, "id": f"call_{next(ids):03d}"}
                for tool, arguments in step
            ],
        )
        for step in STEPS
    ]
    return ScriptedChatModel(responses=[*turns, AIMessage(ANSWER)])


def run(example: Example) -> list[str]:
    desk = example.desk
    tools = [
        StructuredTool.from_function(
            desk.get_order, name="get_order", description="Look up an order."
        ),
        StructuredTool.from_function(
            desk.refund_order, name="refund_order", description="Refund an order."
        ),
        StructuredTool.from_function(
            desk.send_email, name="send_email", description="E-mail the customer."
        ),
        StructuredTool.from_function(
            desk.cancel_order, name="cancel_order", description="Cancel an order."
        ),
    ]
    # The one line of adoption: the middleware, with both sleepers when a test fakes time.
    options = example.executor_options(asynchronous=False)
    if example.clock is not None:
        options["async_sleep"] = example.clock.async_sleep
    boundary = RetryBoundaryMiddleware(example.declarations, **options)
    agent = create_agent(scripted_model(), tools=tools, middleware=[boundary])
    state = agent.invoke(
        {"messages": [("user", USER)]},
        {"configurable": {"thread_id": example.conversation_id, "request_id": example.request_id}},
    )
    lines = []
    for message in state["messages"]:
        if isinstance(message, AIMessage):
            lines.extend(f"model: {call['name']}({call['args']})" for call in message.tool_calls)
            if message.content:
                lines.append(f"model: {message.content}")
        elif isinstance(message, ToolMessage):
            lines.append(f"  -> [{message.status}] {message.content}")
        else:
            lines.append(f"user: {message.content}")
    return lines


if __name__ == "__main__":
    sys.exit(main("langchain", run, sys.argv[1:]))
