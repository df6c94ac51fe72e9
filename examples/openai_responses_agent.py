"""The example agent on the real OpenAI SDK: the Responses API.

    python -m examples.openai_responses_agent [--out out/openai_responses_agent.jsonl]

``function_call`` output items go through the boundary; each result goes
back as a ``function_call_output`` item. Only the model is scripted
(``httpx2.MockTransport``); the ``openai`` client runs for real.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

from toolspan.tracer.integrations import openai as ts_openai

from .loop import MODEL, agent_span, chat_span, numbered
from .runner import Wiring, main
from .scripted_api import ScriptedAPI
from .support_desk import support_tools


def run(wiring: Wiring) -> list[Any]:
    """The agent loop: the conversation is one growing list of input items."""
    executor = wiring.executor(support_tools(wiring.desk))
    specs = [ts_openai.response_tool_spec(tool) for tool in executor.tools.values()]
    client = ScriptedAPI("responses", wiring.requests).openai_client()
    items: list[Any] = []
    for request_id, request in numbered(wiring.conversation_id, wiring.requests):
        items.append({"role": "user", "content": request.user})
        with agent_span(wiring.tracer, wiring.conversation_id, request_id):
            for turn in itertools.count(1):
                with chat_span(wiring.tracer, wiring.conversation_id):
                    response = client.responses.create(model=MODEL, input=items, tools=specs)
                items += response.output  # the SDK's output items go back as they came
                answers = ts_openai.answer_response(
                    executor,
                    response,
                    conversation_id=wiring.conversation_id,
                    request_id=request_id,
                    turn_id=f"{request_id}-turn{turn}",
                )
                if not answers:
                    break
                items += answers
    return items


if __name__ == "__main__":
    sys.exit(main("openai_responses", sys.argv[1:]))
