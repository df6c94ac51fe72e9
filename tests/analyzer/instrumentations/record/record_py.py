"""Runs the scripted support agent of ``scenario.json`` through REAL Python
instrumentations, offline, and writes their spans as OTLP/JSON lines.

    .venv/bin/python -m tests.analyzer.instrumentations.record.record_py STACK on|off OUT

Prints ``{"traces": {trace_id: scenario}, "versions": {...}}``. One process per
recording: instrumentors patch globally and read their capture settings
(OPENINFERENCE_HIDE_INPUTS/OUTPUTS, TRACELOOP_TRACE_CONTENT) from the
environment, which is set here before they start.

* ``langchain-*``: a LangChain 1.x agent (``create_agent``, LangGraph's tool
  node) whose model is LangChain's own ``GenericFakeChatModel`` answering from
  the script; the tools are real; charge raises ``TimeoutError`` twice, which a
  ``wrap_tool_call`` middleware hands to the model as an error ToolMessage.
* ``openai-*``: the openai client, the model an ``httpx2.MockTransport``; the
  app runs the tools itself (not instrumented), so only the model's requested
  calls are in the spans.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from importlib.metadata import version
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

HERE = Path(__file__).resolve().parent
SCENARIO: dict[str, Any] = json.loads((HERE / "scenario.json").read_text())
Call = tuple[str, dict[str, Any]]
# Far above one export of a recording (a few KB): the receiver's inflate bound.
MAX_BODY = 16 * 1024 * 1024


class Scenarios(SpanProcessor):
    """Which scenario each trace belongs to: the one running when its spans end."""

    def __init__(self) -> None:
        self.current = ""
        self.traces: dict[str, str] = {}

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None:
            self.traces[format(span.context.trace_id, "032x")] = self.current


class Tools:
    """The scripted agent's tools; charge times out on its first calls."""

    def __init__(self) -> None:
        self.charges = 0

    def get_order(self, order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "status": "shipped"}

    def send_email(self, to: str, body: str) -> dict[str, Any]:
        return {"sent": True}

    def charge(self, order: str, amount: float) -> dict[str, Any]:
        self.charges += 1
        if self.charges <= SCENARIO["charge_timeouts"]:
            raise TimeoutError("payment gateway timed out after 30s")
        return {"charged": True}


QUESTION = "Help the customer with order A1."


def scripted_chat(scenario: str, script: list[Call], prefix: str = "") -> Any:
    """The model: an ``httpx2`` handler answering each chat completion with the
    script's next tool call (named ``prefix + tool``), then "done"."""
    import httpx2

    turn = 0

    def handle(request: httpx2.Request) -> httpx2.Response:
        nonlocal turn
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if turn < len(script):
            tool, args = script[turn]
            call = {"name": f"{prefix}{tool}", "arguments": json.dumps(args)}
            message["tool_calls"] = [
                {"id": f"call_{scenario}_{turn}", "type": "function", "function": call}
            ]
            finish = "tool_calls"
        else:
            message["content"], finish = "done", "stop"
        turn += 1
        body = {
            "id": f"chatcmpl-{scenario}-{turn}",
            "object": "chat.completion",
            "created": 1767600000,
            "model": "scripted-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return httpx2.Response(200, json=body)

    return handle


def chat_loop(
    create: Callable[[list[Any]], Any],
    tool: Callable[[str], Callable[..., Any]],
    question: str = QUESTION,
) -> str:
    """The app's own agent loop over the openai client: ``create(messages)`` is a
    completion, ``tool(name)`` the function to run; a timeout goes back to the
    model as the tool's result, as an app does, and the run goes on."""
    messages: list[Any] = [{"role": "user", "content": question}]
    while True:
        reply = create(messages).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            return str(reply.content)
        for call in reply.tool_calls:
            try:
                result: Any = tool(call.function.name)(**json.loads(call.function.arguments))
            except TimeoutError as error:
                result = {"error": f"TimeoutError: {error}"}
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )


@contextmanager
def otlp_receiver(out: Path) -> Iterator[str]:
    """An OTLP/HTTP (protobuf, identity or gzip) trace receiver on 127.0.0.1
    appending each request to ``out`` as one OTLP/JSON line, with toolspan
    serve's own converter (what ``toolspan serve`` does with the same bytes);
    its base URL."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from toolspan.serve._otlp import decompress, from_protobuf

    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            plain = decompress(body, self.headers.get("Content-Encoding", ""), MAX_BODY)
            line = from_protobuf(plain).line
            if line is not None:
                with lock, out.open("ab") as file:
                    file.write(line + b"\n")
            # An empty ExportTraceServiceResponse: everything was accepted.
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _set_capture(stack: str, capture: str) -> None:
    if capture == "off" and stack.endswith("openinference"):
        os.environ["OPENINFERENCE_HIDE_INPUTS"] = "true"
        os.environ["OPENINFERENCE_HIDE_OUTPUTS"] = "true"
    if stack.endswith("openllmetry"):
        os.environ["TRACELOOP_TRACE_CONTENT"] = "true" if capture == "on" else "false"
    if stack == "strands" and capture == "off":
        # Strands redacts every content attribute not on the (here empty) allowlist.
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_unredacted_attributes="
    if stack == "google-adk":
        # ADK 2.x writes gen_ai.tool.call.arguments/.result only when the GenAI
        # content capture asks for spans (off by default).
        if capture == "on":
            os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
        else:
            os.environ["ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS"] = "false"


def _instrument(stack: str, provider: TracerProvider) -> dict[str, str]:
    """Start the stack's instrumentor; the versions of what it runs."""
    if stack == "strands" and capture == "off":
        # Strands redacts every content attribute not on the (here empty) allowlist.
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_unredacted_attributes="
    if stack == "strands":
        return {name: version(name) for name in ("strands-agents", "opentelemetry-sdk")}
    if stack == "google-adk":
        # ADK instruments itself, on the global tracer provider (set in record).
        return {name: version(name) for name in ("google-adk", "google-genai", "opentelemetry-sdk")}
    framework, instrumentation = stack.split("-")
    instrumentors = {
        ("langchain", "openinference"): (
            "openinference.instrumentation.langchain",
            "openinference-instrumentation-langchain",
        ),
        ("langchain", "openllmetry"): (
            "opentelemetry.instrumentation.langchain",
            "opentelemetry-instrumentation-langchain",
        ),
        ("openai", "openinference"): (
            "openinference.instrumentation.openai",
            "openinference-instrumentation-openai",
        ),
        ("openai", "openllmetry"): (
            "opentelemetry.instrumentation.openai",
            "opentelemetry-instrumentation-openai",
        ),
    }
    module, package = instrumentors[(framework, instrumentation)]
    cls = {
        ("langchain", "openinference"): "LangChainInstrumentor",
        ("langchain", "openllmetry"): "LangchainInstrumentor",
    }.get((framework, instrumentation), "OpenAIInstrumentor")
    instrumentor = getattr(__import__(module, fromlist=[cls]), cls)()
    instrumentor.instrument(tracer_provider=provider)
    versions = {package: version(package)}
    for name in (
        ("langchain", "langchain-core", "langgraph") if framework == "langchain" else ("openai",)
    ):
        versions[name] = version(name)
    versions["opentelemetry-sdk"] = version("opentelemetry-sdk")
    return versions


def _session(stack: str, session_id: str) -> AbstractContextManager[Any]:
    """The conversation id, the way each instrumentation's users set it."""
    if stack.endswith("openinference"):
        from openinference.instrumentation import using_session

        return using_session(session_id)
    return nullcontext()


# -- LangChain -------------------------------------------------------------------------


def _langchain_run(stack: str, scenario: str, script: list[Call]) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import wrap_tool_call
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import StructuredTool

    class ScriptedModel(GenericFakeChatModel):
        """LangChain's fake chat model; binding tools changes nothing (the script decides)."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    def turns() -> Iterator[AIMessage]:
        for n, (tool, args) in enumerate(script):
            yield AIMessage(
                "", tool_calls=[{"name": tool, "args": args, "id": f"call_{scenario}_{n}"}]
            )
        yield AIMessage("done")

    impl = Tools()
    tools = [
        StructuredTool.from_function(getattr(impl, name), name=name, description=name)
        for name in ("get_order", "send_email", "charge")
    ]

    @wrap_tool_call  # type: ignore[arg-type]
    def report_timeouts(request: Any, handler: Any) -> Any:
        # As an app does: a tool's timeout goes back to the model as an error
        # ToolMessage (LangGraph would end the run on the exception).
        try:
            return handler(request)
        except TimeoutError as error:
            call_id = request.tool_call["id"]
            return ToolMessage(f"TimeoutError: {error}", tool_call_id=call_id, status="error")

    agent = create_agent(ScriptedModel(messages=turns()), tools, middleware=[report_timeouts])
    session_id = f"conv-{scenario}-{stack}"
    config: Any = {"metadata": {"session_id": session_id}, "recursion_limit": 100}
    with _session(stack, session_id):
        agent.invoke({"messages": [("user", "Help the customer with order A1.")]}, config)


# -- openai client -----------------------------------------------------------------------


def _openai_run(stack: str, scenario: str, script: list[Call]) -> None:
    """The app's own agent loop, in an app span of its own that names the
    conversation (the client's spans are otherwise one trace per request)."""
    session_id = f"conv-{scenario}-{stack}"
    tracer = trace.get_tracer("support-agent")
    with tracer.start_as_current_span("support-agent", attributes={"session.id": session_id}):
        _openai_loop(stack, scenario, script)


def _openai_loop(stack: str, scenario: str, script: list[Call]) -> None:
    import httpx2
    import openai

    transport = httpx2.MockTransport(scripted_chat(scenario, script))
    client = openai.OpenAI(api_key="sk-test", http_client=httpx2.Client(transport=transport))
    impl = Tools()
    schema = {"type": "object", "properties": {}}
    tools: Any = [
        {"type": "function", "function": {"name": name, "parameters": schema}}
        for name in ("get_order", "send_email", "charge")
    ]

    def create(messages: list[Any]) -> Any:
        return client.chat.completions.create(
            model="scripted-model", messages=messages, tools=tools
        )

    with _session(stack, f"conv-{scenario}-{stack}"):
        chat_loop(create, lambda name: getattr(impl, name))


# -- Google ADK ----------------------------------------------------------------------------


def _adk_run(stack: str, scenario: str, script: list[Call]) -> None:
    import asyncio

    from google.adk.agents import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    queue = list(enumerate(script))

    class ScriptedLlm(BaseLlm):
        """An offline model: the script's next call, else a final answer."""

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            if queue:
                n, (tool, args) = queue.pop(0)
                call = types.FunctionCall(name=tool, args=args, id=f"call_{scenario}_{n}")
                part = types.Part(function_call=call)
            else:
                part = types.Part(text="done")
            yield LlmResponse(content=types.Content(role="model", parts=[part]))

    impl = Tools()

    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return impl.get_order(order_id)

    def send_email(to: str, body: str) -> dict[str, Any]:
        """Send an e-mail."""
        return impl.send_email(to, body)

    def charge(order: str, amount: float) -> dict[str, Any]:
        """Charge an order."""
        return impl.charge(order, amount)

    model = ScriptedLlm(model="scripted-model")
    agent = LlmAgent(name="support", model=model, tools=[get_order, send_email, charge])
    runner = InMemoryRunner(agent=agent, app_name="support")
    session_id = f"conv-{scenario}-{stack}"

    async def run() -> None:
        await runner.session_service.create_session(
            app_name="support", user_id="u1", session_id=session_id
        )
        message = types.Content(role="user", parts=[types.Part(text="Help with order A1.")])
        # A tool's exception ends ADK's run: the app asks again in the same
        # session, as a chat app's retry does (like Vercel AI SDK 4).
        while queue:
            try:
                async for _ in runner.run_async(
                    user_id="u1", session_id=session_id, new_message=message
                ):
                    pass
            except TimeoutError:
                continue

    asyncio.run(run())


# -- Strands Agents --------------------------------------------------------------------------


def _strands_run(stack: str, scenario: str, script: list[Call]) -> None:
    from strands import Agent, tool
    from strands.models import Model

    queue = list(enumerate(script))

    class ScriptedModel(Model):
        """An offline model streaming the script's next call (Bedrock stream events)."""

        def update_config(self, **model_config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {"model_id": "scripted-model"}

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(
            self, messages: Any, tool_specs: Any = None, *args: Any, **kwargs: Any
        ) -> Any:
            yield {"messageStart": {"role": "assistant"}}
            if queue:
                n, (name, arguments) = queue.pop(0)
                use = {"toolUseId": f"call_{scenario}_{n}", "name": name}
                yield {"contentBlockStart": {"start": {"toolUse": use}}}
                yield {
                    "contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}
                }
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
            else:
                yield {"contentBlockDelta": {"delta": {"text": "done"}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}

    impl = Tools()

    @tool
    def get_order(order_id: str) -> dict[str, Any]:
        """Read an order."""
        return impl.get_order(order_id)

    @tool
    def send_email(to: str, body: str) -> dict[str, Any]:
        """Send an e-mail."""
        return impl.send_email(to, body)

    @tool
    def charge(order: str, amount: float) -> dict[str, Any]:
        """Charge an order."""
        return impl.charge(order, amount)

    agent = Agent(
        model=ScriptedModel(),
        tools=[get_order, send_email, charge],
        trace_attributes={"session.id": f"conv-{scenario}-{stack}"},
        callback_handler=None,
    )
    agent("Help the customer with order A1.")


def record(stack: str, capture: str, out: Path) -> dict[str, Any]:
    _set_capture(stack, capture)
    scenarios = Scenarios()
    provider = TracerProvider(resource=Resource.create({"service.name": f"support-agent-{stack}"}))
    provider.add_span_processor(scenarios)
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(out))))
    versions = _instrument(stack, provider)
    trace.set_tracer_provider(provider)
    runs = {
        "langchain": _langchain_run,
        "openai": _openai_run,
        "google": _adk_run,
        "strands": _strands_run,
    }
    run = runs[stack.split("-")[0]]
    for scenario, calls in SCENARIO["scenarios"].items():
        scenarios.current = scenario
        run(stack, scenario, [(tool, args) for tool, args in calls])
    provider.shutdown()
    return {"traces": scenarios.traces, "versions": versions}


if __name__ == "__main__":
    stack, capture, out = sys.argv[1:4]
    Path(out).unlink(missing_ok=True)
    print(json.dumps(record(stack, capture, Path(out))))
