"""The example agent with its tools on a real MCP server.

    python -m examples.mcp_agent [--out out/mcp_agent.jsonl]

The support desk runs as a real MCP server (``examples/mcp_server.py``) in
this process, reached over the SDK's in-memory transport with JSON-RPC
framing (``python -m examples.mcp_server`` serves it on stdio). The client
session's ``call_tool`` goes through the boundary (:class:`GuardedSession`):
tools declared from the server's listing, retry safety from the
application's declarations, failures as ``isError`` results. The model is
the scripted one behind the real ``openai`` client.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types
from mcp import Client

from toolspan.tracer.integrations import Declaration, Declarations
from toolspan.tracer.integrations import openai as ts_openai
from toolspan.tracer.integrations.mcp import GuardedSession

from .loop import MODEL, agent_span, chat_span, numbered
from .mcp_server import support_server
from .runner import Wiring, main
from .scripted_api import ScriptedAPI

# The client's request timeout: a later answer is a `timeout` failure.
TIMEOUT_S = 0.5


def declarations(client: Client) -> Declarations:
    """Retry safety, stated by the application (the server's hints are not trusted)."""

    def by_order(args: Mapping[str, Any]) -> str:
        return str(args["order_id"])

    async def cancelled(order_id: str) -> Any:
        """The read-back: ask the server whether the cancel took effect."""
        answer = await client.session.call_tool("get_cancellation", {"order_id": order_id})
        return answer.structured_content or None

    return Declarations(
        {
            "get_order": Declaration.read(),
            "track_shipment": Declaration.read(),
            "check_inventory": Declaration.read(),
            "get_cancellation": Declaration.read(),
            "refund_order": Declaration.write(
                # keys_honoured: checked by tests/tracer/test_keys_honoured.py
                idempotent=True,
                resource_key=by_order,
                keys_honoured=True,
            ),
            "cancel_order": Declaration.write(read_back=cancelled, resource_key=by_order),
            # send_email is not declared: a write that is never repeated blind.
        }
    )


def classify(result: mcp_types.CallToolResult) -> str:
    """This server names the failed service's status in the structured content."""
    content = result.structured_content
    return str(content.get("error_code")) if isinstance(content, dict) else "mcp_tool_error"


def run(wiring: Wiring) -> list[Any]:
    return anyio.run(_run, wiring)


async def _run(wiring: Wiring) -> list[Any]:
    # The server's own spans stay out of the agent's file (see support_server).
    server = support_server(wiring.desk, late_s=4 * TIMEOUT_S, traced=False)
    async with Client(server, mode="legacy") as client:
        guarded = await GuardedSession.open(
            client.session,
            wiring.async_executor,
            conversation_id=wiring.conversation_id,
            declarations=declarations(client),
            timeout_s=TIMEOUT_S,
            classify=classify,
        )
        return await _agent(wiring, guarded)


async def _agent(wiring: Wiring, guarded: GuardedSession) -> list[Any]:
    """The agent loop: the model's tool calls go to the MCP server through the boundary."""
    offered = [t for t in guarded.tools if t.name != "get_cancellation"]  # used for read-backs
    specs = [ts_openai.chat_tool_spec(tool) for tool in offered]
    model = ScriptedAPI("chat", wiring.requests).async_openai_client()
    messages: list[Any] = []
    for request_id, request in numbered(wiring.conversation_id, wiring.requests):
        messages.append({"role": "user", "content": request.user})
        with agent_span(wiring.tracer, wiring.conversation_id, request_id):
            for turn in itertools.count(1):
                with chat_span(wiring.tracer, wiring.conversation_id):
                    completion = await model.chat.completions.create(
                        model=MODEL, messages=messages, tools=specs
                    )
                message = completion.choices[0].message
                messages.append(message)
                if not message.tool_calls:
                    break
                for tool_call in message.tool_calls:
                    assert tool_call.type == "function"
                    result = await guarded.call_tool(
                        tool_call.function.name,
                        tool_call.function.arguments,
                        call_id=tool_call.id,
                        request_id=request_id,
                        turn_id=f"{request_id}-turn{turn}",
                    )
                    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
                    messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": text})
    return messages


if __name__ == "__main__":
    sys.exit(main("mcp", sys.argv[1:]))
