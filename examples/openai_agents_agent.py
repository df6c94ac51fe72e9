"""The example agent on the OpenAI Agents SDK: its Runner, its FunctionTools, a scripted Model.

    python -m examples.openai_agents_agent [--out out/openai_agents_agent.jsonl]

The agent loop is the SDK's own ``Runner.run``; the model is the SDK's
``agents.testing.ScriptedModel`` (the ``Model`` interface, answering from a
script), so it runs offline. ``guard_agent`` puts each function tool behind
the boundary. Then: ``toolspan analyze out/``.
"""

from __future__ import annotations

import itertools
import sys

from agents import Agent, ItemHelpers, RunConfig, Runner, function_tool
from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

from toolspan.tracer.integrations.openai_agents import guard_agent

from .frameworks import ANSWER, STEPS, USER, Example, main

__all__ = ["run"]


def scripted_model() -> ScriptedModel:
    """The script as the SDK's Responses-shaped output items, one model call per step."""
    ids = itertools.count(1)
    turns = [
        [
            function_call(tool, arguments, call_id=f"call_{next(ids):03d}")
            for tool, arguments in step
        ]
        for step in STEPS
    ]
    return ScriptedModel([*turns, [assistant_message(ANSWER)]])


def run(example: Example) -> list[str]:
    desk = example.desk
    tools = [
        function_tool(
            desk.get_order, name_override="get_order", description_override="Look up an order."
        ),
        function_tool(
            desk.refund_order, name_override="refund_order", description_override="Refund an order."
        ),
        function_tool(
            desk.send_email, name_override="send_email", description_override="E-mail the customer."
        ),
        function_tool(
            desk.cancel_order, name_override="cancel_order", description_override="Cancel an order."
        ),
    ]
    agent = Agent(
        name="support-desk", instructions="Help the rider.", model=scripted_model(), tools=tools
    )
    # The one line of adoption: the same agent, its function tools behind the boundary.
    guarded = guard_agent(
        agent, example.declarations, **example.executor_options(asynchronous=True)
    )
    result = Runner.run_sync(
        guarded,
        USER,
        run_config=RunConfig(
            tracing_disabled=True,  # offline: the SDK's own trace export needs an API key
            group_id=example.conversation_id,
            trace_metadata={"request_id": example.request_id},
        ),
    )
    lines = [f"user: {USER}"]
    for item in result.new_items:
        if isinstance(item, ToolCallItem):
            raw = item.raw_item
            lines.append(f"model: {getattr(raw, 'name', '?')}({getattr(raw, 'arguments', '')})")
        elif isinstance(item, ToolCallOutputItem):
            lines.append(f"  -> {item.output}")
        elif isinstance(item, MessageOutputItem):
            lines.append(f"model: {ItemHelpers.text_message_output(item)}")
    return lines


if __name__ == "__main__":
    sys.exit(main("openai_agents", run, sys.argv[1:]))
