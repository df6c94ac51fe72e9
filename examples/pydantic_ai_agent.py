"""The example agent on Pydantic AI: its Agent loop, its tools, a scripted FunctionModel.

    python -m examples.pydantic_ai_agent [--out out/pydantic_ai_agent.jsonl]

The agent loop is Pydantic AI's own; the model is its ``FunctionModel``
answering from the script, so it runs offline. The ``RetryBoundary``
capability puts every tool call behind the boundary; Pydantic AI's own
OpenTelemetry spans (``invoke_agent``, ``chat``, ``execute_tool``) go to the
same file, and the analyzer counts each call once. Then: ``toolspan analyze out/``.
"""

from __future__ import annotations

import itertools
import sys

from pydantic_ai import Agent, Tool
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from toolspan.tracer.integrations.pydantic_ai import RetryBoundary

from .frameworks import ANSWER, STEPS, USER, Example, main

__all__ = ["run", "scripted_model"]


def scripted_model() -> FunctionModel:
    """A model that makes the script's calls, one step per model request, then answers."""
    ids = itertools.count(1)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(message, ModelResponse) for message in messages)
        if turn < len(STEPS):
            return ModelResponse(
                parts=[
                    ToolCallPart(tool, arguments, tool_call_id=f"call_{next(ids):03d}")
                    for tool, arguments in STEPS[turn]
                ]
            )
        return ModelResponse(parts=[TextPart(ANSWER)])

    return FunctionModel(respond, model_name="scripted-model")


def run(example: Example) -> list[str]:
    desk = example.desk
    agent = Agent(
        scripted_model(),
        instructions="Help the rider.",
        tools=[
            Tool(desk.get_order, takes_ctx=False, description="Look up an order."),
            Tool(desk.refund_order, takes_ctx=False, description="Refund an order."),
            Tool(desk.send_email, takes_ctx=False, description="E-mail the customer."),
            Tool(desk.cancel_order, takes_ctx=False, description="Cancel an order."),
        ],
        capabilities=[
            # Pydantic AI's own spans, into the same file as toolspan's.
            Instrumentation(
                InstrumentationSettings(tracer_provider=example.telemetry.tracer_provider)
            ),
            # The one line of adoption: every tool call behind the boundary.
            RetryBoundary(example.declarations, **example.executor_options(asynchronous=True)),
        ],
    )
    result = agent.run_sync(
        USER, conversation_id=example.conversation_id, run_id=example.request_id
    )
    lines = [f"user: {USER}"]
    for message in result.new_messages():
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                lines.append(f"model: {part.tool_name}({part.args_as_json_str()})")
            elif isinstance(part, ToolReturnPart):
                lines.append(f"  -> [{part.outcome}] {part.model_response_str()}")
            elif isinstance(part, TextPart):
                lines.append(f"model: {part.content}")
    return lines


if __name__ == "__main__":
    sys.exit(main("pydantic_ai", run, sys.argv[1:]))
