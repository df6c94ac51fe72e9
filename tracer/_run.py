"""One handling of one request: the run span, and the ids its calls inherit.

``executor.run("refund-agent", request_id=rid, conversation_id=cid)`` opens an
``invoke_agent refund-agent`` span and makes it current, so every call span
inside is its child: one trace per request instead of one per tool call. A
call made inside with no ``request_id`` or ``conversation_id`` takes the run's.

A run is also one **delivery** of its request: a queue that redelivers the
request (a worker died, a visibility timeout ran out) handles it again in a new
run. The turn budget and the loop guard count within one delivery, so a
redelivery is not punished for the attempts of the one before; its keyed writes
still replay instead of running again (the keys are the request's, not the
delivery's). Without a run, each executor is one delivery.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from opentelemetry import trace

from . import _attributes as attr
from ._spans import SpanWriter

__all__ = ["CURRENT_RUN", "AgentRun", "new_delivery_id", "open_run"]


@dataclass(frozen=True, slots=True)
class AgentRun:
    """The run in progress (what :meth:`Executor.run` yields)."""

    name: str
    request_id: str
    conversation_id: str
    delivery_id: str


CURRENT_RUN: contextvars.ContextVar[AgentRun | None] = contextvars.ContextVar(
    "toolspan_current_run", default=None
)


def new_delivery_id() -> str:
    return uuid.uuid4().hex


@contextmanager
def open_run(
    spans: SpanWriter,
    name: str,
    *,
    request_id: str,
    conversation_id: str,
    delivery_id: str | None,
) -> Iterator[AgentRun]:
    """The run span, current while the block runs; ended (with any exception
    recorded) when it leaves."""
    run = AgentRun(name, request_id, conversation_id, delivery_id or new_delivery_id())
    attributes = {
        attr.OPERATION_NAME: "invoke_agent",
        attr.AGENT_NAME: name,
        attr.DELIVERY_ID: run.delivery_id,
    }
    if request_id:
        attributes[attr.REQUEST_ID] = request_id
    if conversation_id:
        attributes[attr.CONVERSATION_ID] = conversation_id
    span = spans.start_run(f"invoke_agent {name}", attributes)
    token = CURRENT_RUN.set(run)
    try:
        with trace.use_span(span, end_on_exit=False, record_exception=True):
            yield run
    finally:
        CURRENT_RUN.reset(token)
        spans.end(span)
