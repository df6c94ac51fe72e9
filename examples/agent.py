"""A small, complete agent loop through toolspan, with a scripted "model".

The loop is the part to copy: ask the model, turn each tool call it makes
into a :class:`ToolCall`, hand the batch to the executor, and put each
structured result straight into the next message. Only the model is
scripted, so the example runs offline and the same every time; it speaks
the OpenAI Chat Completions or the Anthropic Messages shape.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from opentelemetry import trace
from opentelemetry.trace import Tracer

from toolspan.tracer import Executor, ToolCall, ToolResult
from toolspan.tracer.store import derive_key

__all__ = ["Planned", "Request", "ScriptedModel", "run_conversation"]

Shape = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class Planned:
    """One tool call the scripted model will make.

    ``step`` names the logical action for writes: the idempotency key is
    derived from the request id and the step, so a re-plan of the same step
    (a new call id) carries the same key. ``step=None`` sends no key.
    """

    tool: str
    arguments: dict[str, Any]
    step: str | None = None


@dataclass(frozen=True)
class Request:
    """One user message and the model turns (batches of calls) it leads to."""

    user: str
    turns: Sequence[Sequence[Planned]]
    answer: str = "Done."


@dataclass
class ScriptedModel:
    """Stands in for an LLM: replays planned turns in the chosen API shape."""

    shape: Shape
    model_name: str = "scripted-model"
    # Like a real API's ids: unique across conversations, fresh on every call.
    id_prefix: str = ""
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def _next_id(self) -> str:
        return f"{self.id_prefix}{next(self._ids):04d}"

    def respond(self, planned: Sequence[Planned], final: str) -> dict[str, Any]:
        """The assistant message for one turn: tool calls, or the final text."""
        if not planned:
            if self.shape == "openai":
                return {"role": "assistant", "content": final}
            return {"role": "assistant", "content": [{"type": "text", "text": final}]}
        if self.shape == "openai":
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{self._next_id()}",
                        "type": "function",
                        "function": {
                            "name": p.tool,
                            "arguments": orjson.dumps(p.arguments).decode(),
                        },
                    }
                    for p in planned
                ],
            }
        return {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(self._ids):04d}",
                    "name": p.tool,
                    "input": p.arguments,
                }
                for p in planned
            ],
        }


def tool_calls_of(
    message: dict[str, Any],
    planned: Sequence[Planned],
    *,
    shape: Shape,
    conversation_id: str,
    request_id: str,
    turn_id: str,
) -> list[ToolCall]:
    """The model's tool calls as ToolCalls, each with its idempotency key."""
    keys = [derive_key(request_id, p.step) if p.step else None for p in planned]
    ids = {"conversation_id": conversation_id, "request_id": request_id, "turn_id": turn_id}
    if shape == "openai":
        return [
            ToolCall.from_openai(raw, idempotency_key=key, **ids)
            for raw, key in zip(message["tool_calls"], keys, strict=True)
        ]
    blocks = [b for b in message["content"] if b["type"] == "tool_use"]
    return [
        ToolCall.from_anthropic(block, idempotency_key=key, **ids)
        for block, key in zip(blocks, keys, strict=True)
    ]


def results_message(results: Sequence[ToolResult], shape: Shape) -> list[dict[str, Any]]:
    """The tool results as the next message(s) for the model."""
    if shape == "openai":
        return [result.to_openai_message() for result in results]
    return [{"role": "user", "content": [result.to_anthropic_block() for result in results]}]


def run_conversation(
    requests: Sequence[Request],
    executor: Executor,
    *,
    conversation_id: str,
    shape: Shape = "openai",
    tracer: Tracer | None = None,
    now_ns: Callable[[], int | None] = lambda: None,
    model_pause: Callable[[float], None] = lambda _seconds: None,
) -> list[dict[str, Any]]:
    """Run every request of one conversation; returns the message transcript.

    Each request gets an ``invoke_agent`` span and each model turn a ``chat``
    span (GenAI conventions), so tool spans sit inside a realistic trace.
    ``now_ns`` stamps those spans and ``model_pause`` stands for the model's
    latency when the caller simulates time.
    """
    tracer = tracer or trace.get_tracer("toolspan.examples")
    model = ScriptedModel(shape, id_prefix=hashlib.sha256(conversation_id.encode()).hexdigest()[:8])
    messages: list[dict[str, Any]] = []
    for request_index, request in enumerate(requests, start=1):
        request_id = f"{conversation_id}-req{request_index}"
        messages.append({"role": "user", "content": request.user})
        agent_span = tracer.start_span(
            "invoke_agent support-desk",
            start_time=now_ns(),
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support-desk",
                "gen_ai.conversation.id": conversation_id,
                "toolspan.request.id": request_id,
            },
        )
        with trace.use_span(agent_span, end_on_exit=False):
            for turn_index, planned in enumerate([*request.turns, []], start=1):
                turn_id = f"{request_id}-turn{turn_index}"
                chat = tracer.start_span(
                    f"chat {model.model_name}",
                    start_time=now_ns(),
                    attributes={
                        "gen_ai.operation.name": "chat",
                        "gen_ai.request.model": model.model_name,
                        "gen_ai.conversation.id": conversation_id,
                    },
                )
                reply = model.respond(planned, request.answer)
                model_pause(0.4 + 0.2 * len(planned))
                chat.end(end_time=now_ns())
                messages.append(reply)
                if not planned:
                    break
                calls = tool_calls_of(
                    reply,
                    planned,
                    shape=shape,
                    conversation_id=conversation_id,
                    request_id=request_id,
                    turn_id=turn_id,
                )
                messages.extend(results_message(executor.execute_batch(calls), shape))
        agent_span.end(end_time=now_ns())
    return messages
