"""The parts every SDK agent loop shares: request ids and the GenAI spans around the model.

Each request gets an ``invoke_agent`` span and each model turn a ``chat``
span (GenAI conventions), so the tool spans sit inside a realistic trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.trace import Tracer

from .agent import Request
from .scripted_api import MODEL

__all__ = ["MODEL", "agent_span", "chat_span", "numbered"]


def numbered(conversation_id: str, requests: Sequence[Request]) -> Iterator[tuple[str, Request]]:
    """Each request with its id: stable across retries and re-plans (keys derive from it)."""
    for index, request in enumerate(requests, start=1):
        yield f"{conversation_id}-req{index}", request


@contextmanager
def agent_span(tracer: Tracer, conversation_id: str, request_id: str) -> Iterator[None]:
    with tracer.start_as_current_span(
        "invoke_agent support-desk",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support-desk",
            "gen_ai.conversation.id": conversation_id,
            "toolspan.request.id": request_id,
        },
    ):
        yield


@contextmanager
def chat_span(tracer: Tracer, conversation_id: str) -> Iterator[trace.Span]:
    with tracer.start_as_current_span(
        f"chat {MODEL}",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": MODEL,
            "gen_ai.conversation.id": conversation_id,
        },
    ) as span:
        yield span
