"""The example agent on the real OpenAI SDK: Chat Completions.

    python -m examples.openai_agent [--out out/openai_agent.jsonl]

The ``openai`` client runs for real (request building, response parsing);
only the model behind it is scripted, through ``httpx2.MockTransport``.
Spans go to an OTLP/JSON lines file and, when OTEL_EXPORTER_OTLP_ENDPOINT is
set, to your collector as well. Then: ``toolspan analyze out/``.
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
    """The agent loop: ask the model, run its tool calls through the boundary, answer."""
    executor = wiring.executor(support_tools(wiring.desk))
    specs = [ts_openai.chat_tool_spec(tool) for tool in executor.tools.values()]
    client = ScriptedAPI("chat", wiring.requests).openai_client()
    messages: list[Any] = []
    for request_id, request in numbered(wiring.conversation_id, wiring.requests):
        messages.append({"role": "user", "content": request.user})
        with agent_span(wiring.tracer, wiring.conversation_id, request_id):
            for turn in itertools.count(1):
                with chat_span(wiring.tracer, wiring.conversation_id):
                    completion = client.chat.completions.create(
                        model=MODEL, messages=messages, tools=specs
                    )
                message = completion.choices[0].message
                messages.append(message)  # the SDK object goes back as it came
                if not message.tool_calls:
                    break
                messages += ts_openai.answer_chat(
                    executor,
                    completion,
                    conversation_id=wiring.conversation_id,
                    request_id=request_id,
                    turn_id=f"{request_id}-turn{turn}",
                )
    return messages


if __name__ == "__main__":
    sys.exit(main("openai", sys.argv[1:]))
