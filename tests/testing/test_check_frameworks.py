"""``toolspan check`` driving each framework adapter's own tool objects.

The tool is README §2's refund on an httpx client whose transport is the
kit's; the key travels as ``send_idempotency_key()``'s header, declared
``key_passed``. Each framework's tool object (an Agents SDK ``FunctionTool``,
a Pydantic AI agent's tool, a LangChain ``@tool`` in a ``ToolNode``, an MCP
server's tool through ``GuardedSession``) runs the check's call as the
framework does, through ``CheckTarget(run=...)``; the rows come from the
adapter's executor through ``kit.hook``. Three variants each: the key not
passed (no hook on the client), a service that ignores keys, and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mcp.server.mcpserver import Context  # at module level: the server reads the annotations

from tests.testing.refund_checks import FakePayments
from toolspan.testing import CheckTarget, FaultKit, check
from toolspan.tracer import AsyncExecutor, ToolCall, raise_for_httpx_status, send_idempotency_key
from toolspan.tracer.integrations import Declaration, Declarations

REFUND = {"order_id": "R-441", "amount_cents": 1299}
# The variants: (the client sends the key, the service honours it).
VARIANTS = {
    "key not passed": (False, True),
    "service ignores keys": (True, False),
    "fixed": (True, True),
}
DOUBLES = {"timeout after commit", "late commit 0.5 s", "timeout after commit, twice,"}


def declarations() -> Declarations:
    return Declarations(
        {
            "refund_order": Declaration.write(
                idempotent=True,
                resource_key=lambda args: args["order_id"],
                key_passed="Idempotency-Key header",
            )
        }
    )


def payments(kit: FaultKit, variant: str) -> Callable[[str, int], dict[str, Any]]:
    """README §2's refund: POST /refunds on the kit's transport, the key by header or not."""
    sends_key, honours_keys = VARIANTS[variant]
    client = httpx.Client(
        base_url="https://payments.example",
        timeout=5,
        transport=kit.httpx_transport(FakePayments(kit, honours_keys=honours_keys)),
        event_hooks={"request": [send_idempotency_key()]} if sends_key else {},
    )

    def refund_order(order_id: str, amount_cents: int) -> dict[str, Any]:
        body = {"order_id": order_id, "amount_cents": amount_cents}
        response = client.post("/refunds", json=body)
        return raise_for_httpx_status(response)

    return refund_order


def build_openai_agents(variant: str):
    from agents import RunConfig, function_tool
    from agents.tool_context import ToolContext

    from toolspan.tracer.integrations.openai_agents import guard_tools

    def build(kit: FaultKit) -> CheckTarget:
        refund = payments(kit, variant)

        @function_tool
        def refund_order(order_id: str, amount_cents: int) -> dict[str, Any]:
            """Refund an order."""
            return refund(order_id, amount_cents)

        (guarded,) = guard_tools(
            [refund_order],
            declarations(),
            **kit.executor_options(asynchronous=True),
            hooks=[kit.hook],
        )

        def run(call: ToolCall) -> Any:
            arguments = json.dumps(call.arguments)
            context = ToolContext(
                None,
                tool_name=call.name,
                tool_call_id=call.call_id,
                tool_arguments=arguments,
                run_config=RunConfig(
                    tracing_disabled=True,
                    group_id=call.conversation_id,
                    trace_metadata={"request_id": call.request_id},
                ),
            )
            return guarded.on_invoke_tool(context, arguments)  # type: ignore[union-attr]

        return CheckTarget(run=run, declarations=declarations(), arguments={"refund_order": REFUND})

    return build


def build_pydantic_ai(variant: str):
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from toolspan.tracer.integrations.pydantic_ai import RetryBoundary

    def build(kit: FaultKit) -> CheckTarget:
        refund = payments(kit, variant)

        def run(call: ToolCall) -> Any:
            def model(messages: list[Any], info: Any) -> ModelResponse:
                if len(messages) == 1:  # the model calls the tool once, then answers
                    return ModelResponse(
                        parts=[ToolCallPart(call.name, dict(call.arguments), tool_call_id="t1")]
                    )
                return ModelResponse(parts=[TextPart("done")])

            boundary = RetryBoundary(
                declarations(), **kit.executor_options(asynchronous=True), hooks=[kit.hook]
            )
            agent = Agent(FunctionModel(model), capabilities=[boundary])

            @agent.tool_plain
            def refund_order(order_id: str, amount_cents: int) -> dict[str, Any]:
                return refund(order_id, amount_cents)

            return agent.run("refund", conversation_id=call.conversation_id, run_id=call.request_id)

        return CheckTarget(run=run, declarations=declarations(), arguments={"refund_order": REFUND})

    return build


def build_langchain(variant: str):
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph

    from toolspan.tracer.integrations.langchain import guarded_tool_node

    def build(kit: FaultKit) -> CheckTarget:
        refund = payments(kit, variant)

        @tool
        def refund_order(order_id: str, amount_cents: int) -> dict[str, Any]:
            """Refund an order."""
            return refund(order_id, amount_cents)

        node = guarded_tool_node(
            [refund_order],
            declarations(),
            **kit.executor_options(),
            async_sleep=kit.clock.async_sleep,
            hooks=[kit.hook],
        )
        # The node in a graph of its own: LangGraph gives a ToolNode its runtime there.
        graph = StateGraph(MessagesState)
        graph.add_node("tools", node)
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        compiled = graph.compile()

        def run(call: ToolCall) -> Any:
            asked = AIMessage(
                "", tool_calls=[{"name": call.name, "args": dict(call.arguments), "id": "t1"}]
            )
            configurable = {"thread_id": call.conversation_id, "request_id": call.request_id}
            return compiled.invoke({"messages": [asked]}, {"configurable": configurable})

        return CheckTarget(run=run, declarations=declarations(), arguments={"refund_order": REFUND})

    return build


def build_mcp(variant: str):
    from mcp import Client
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError as ServerToolError

    from toolspan.tracer.integrations.mcp import IDEMPOTENCY_META_KEY, GuardedSession

    sends_key, honours_keys = VARIANTS[variant]

    def build(kit: FaultKit) -> CheckTarget:
        # The MCP server is the tool: its refund forwards the key from _meta (or not).
        client = httpx.Client(
            base_url="https://payments.example",
            transport=kit.httpx_transport(FakePayments(kit, honours_keys=honours_keys)),
        )
        server = MCPServer("payments")

        @server.tool()
        def refund_order(order_id: str, amount_cents: int, ctx: Context) -> dict[str, Any]:
            key = (ctx.request_context.meta or {}).get(IDEMPOTENCY_META_KEY)
            headers = {"Idempotency-Key": key} if sends_key and key else {}
            body = {"order_id": order_id, "amount_cents": amount_cents}
            try:
                response = client.post("/refunds", json=body, headers=headers)
            except httpx.TimeoutException as exc:
                raise ServerToolError("transient: the payments API timed out") from exc
            return response.raise_for_status().json()

        def transient(result: Any) -> str:
            # The server marks what may be retried; the application says so by classify.
            text = " ".join(getattr(block, "text", "") for block in result.content)
            return "timeout" if "transient:" in text else "mcp_tool_error"

        async def run(call: ToolCall) -> Any:
            async with Client(server, mode="legacy") as connected:
                guarded = await GuardedSession.open(
                    connected.session,
                    lambda tools: AsyncExecutor(tools, **kit.executor_options(asynchronous=True)),
                    conversation_id=call.conversation_id,
                    declarations=declarations(),
                    classify=transient,
                )
                return await guarded.execute(
                    call.name, call.arguments, call_id=call.call_id, request_id=call.request_id
                )

        return CheckTarget(run=run, declarations=declarations(), arguments={"refund_order": REFUND})

    return build


FRAMEWORKS = {
    "openai-agents": build_openai_agents,
    "pydantic-ai": build_pydantic_ai,
    "langchain": build_langchain,
    "mcp": build_mcp,
}


@pytest.mark.parametrize("variant", ["key not passed", "service ignores keys"])
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_check_finds_the_double_refund_through_the_frameworks_tool(framework, variant):
    report = check(FRAMEWORKS[framework](variant))
    assert {row.scenario for row in report.unsafe} == DOUBLES
    assert {row.effects for row in report.unsafe} == {2, 3}
    assert "declared as passed by Idempotency-Key header" in report.unsafe[0].fix


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_fixed_refund_passes_through_the_frameworks_tool(framework):
    report = check(FRAMEWORKS[framework]("fixed"))
    assert report.passed, [row for row in report.rows if row.unsafe]
    rows = {row.scenario: row for row in report.rows}
    assert rows["timeout after commit"].status == "succeeded"
    assert rows["timeout after commit"].attempts == 2  # really retried, answered from the key


def test_a_framework_answer_without_the_kits_hook_is_refused_not_counted():
    def build(kit: FaultKit) -> CheckTarget:
        refund = payments(kit, "fixed")
        executor = AsyncExecutor(
            [declarations().tool("refund_order", refund)], **kit.executor_options(asynchronous=True)
        )

        async def run(call: ToolCall) -> Any:
            return (await executor.execute(call)).data  # a native answer, no hook

        return CheckTarget(run=run, declarations=declarations(), arguments={"refund_order": REFUND})

    with pytest.raises(TypeError, match=r"hooks=\[kit.hook\]"):
        check(build)
