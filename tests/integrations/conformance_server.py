"""The server the MCP conformance suite (`@modelcontextprotocol/conformance`) tests, in Python.

The suite's own reference server is not published to npm, so this one, on the
``mcp`` SDK, answers its server scenarios as the reference does (the tool,
resource and prompt names and contents the checks look for). The suite's score
against it bare and through ``toolspan mcp proxy`` is compared by
tests/integrations/test_mcp_conformance.py. ``python -m
tests.integrations.conformance_server PORT`` serves it on streamable HTTP.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import mcp_types as t
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage

IMAGE = (  # a 1x1 red PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)  # fmt: skip
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


def _text(text: str) -> t.TextContent:
    return t.TextContent(type="text", text=text)


def _result(*content: Any) -> t.CallToolResult:
    return t.CallToolResult(content=list(content))


def build() -> MCPServer:
    server = MCPServer("mcp-conformance-test-server")
    _tools(server)
    _interactive_tools(server)
    _resources(server)
    _prompts(server)

    async def set_level(ctx: Any, params: t.SetLevelRequestParams) -> t.EmptyResult:
        return t.EmptyResult()

    async def subscription(ctx: Any, params: Any) -> t.EmptyResult:
        return t.EmptyResult()

    low = server._lowlevel_server  # the SDK's own way for methods MCPServer has no decorator for
    low.add_request_handler("logging/setLevel", t.SetLevelRequestParams, set_level)
    low.add_request_handler("resources/subscribe", t.SubscribeRequestParams, subscription)
    low.add_request_handler("resources/unsubscribe", t.UnsubscribeRequestParams, subscription)

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> t.Completion:
        return t.Completion(values=["paris", "park", "party"], total=3, has_more=False)

    return server


def _tools(server: MCPServer) -> None:
    @server.tool(description="Tests simple text content response")
    def test_simple_text() -> t.CallToolResult:
        return _result(_text("This is a simple text response for testing."))

    @server.tool(description="Tests image content response")
    def test_image_content() -> t.CallToolResult:
        return _result(t.ImageContent(type="image", data=IMAGE, mime_type="image/png"))

    @server.tool(description="Tests audio content response")
    def test_audio_content() -> t.CallToolResult:
        return _result(t.AudioContent(type="audio", data=AUDIO, mime_type="audio/wav"))

    @server.tool(description="Tests embedded resource content response")
    def test_embedded_resource() -> t.CallToolResult:
        return _result(
            _embedded("test://embedded-resource", "This is an embedded resource content.")
        )

    @server.tool(description="Tests response with multiple content types (text, image, resource)")
    def test_multiple_content_types() -> t.CallToolResult:
        data = json.dumps({"test": "data", "value": 123}, separators=(",", ":"))
        return _result(
            _text("Multiple content types test:"),
            t.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
            _embedded("test://mixed-content-resource", data, "application/json"),
        )

    @server.tool(description="Tests tool that emits log messages during execution")
    async def test_tool_with_logging(ctx: Context) -> t.CallToolResult:
        for message in (
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ):
            await ctx.log("info", message)
            await asyncio.sleep(0.05)
        return _result(_text("Tool with logging executed successfully"))

    @server.tool(description="Tests tool that reports progress notifications")
    async def test_tool_with_progress(ctx: Context) -> t.CallToolResult:
        for step in (0, 50, 100):
            await ctx.report_progress(step, 100, f"Completed step {step} of 100")
            await asyncio.sleep(0.05)
        meta = ctx.request_context.meta or {}
        return _result(_text(str(meta.get("progressToken", 0))))

    @server.tool(description="Tests error response handling")
    def test_error_handling() -> t.CallToolResult:
        return t.CallToolResult(
            content=[_text("This tool intentionally returns an error for testing")], is_error=True
        )

    @server.tool(description="Tool with JSON Schema 2020-12 features (SEP-1613)")
    def json_schema_2020_12_tool(name: str | None = None) -> t.CallToolResult:
        return _result(_text(f"JSON Schema 2020-12 tool called with: {json.dumps({'name': name})}"))


def _interactive_tools(server: MCPServer) -> None:
    @server.tool(description="Tests server-initiated sampling (LLM completion request)")
    async def test_sampling(prompt: str, ctx: Context) -> t.CallToolResult:
        message = t.SamplingMessage(role="user", content=_text(prompt))
        answer = await ctx.request_context.session.create_message(
            [message], max_tokens=100, related_request_id=ctx.request_id
        )
        content = answer.content
        text = getattr(content, "text", None) or "No response"
        return _result(_text(f"LLM response: {text}"))

    @server.tool(description="Tests server-initiated elicitation (user input request)")
    async def test_elicitation(message: str, ctx: Context) -> t.CallToolResult:
        schema = {
            "type": "object",
            "properties": {"response": {"type": "string", "description": "User's response"}},
            "required": ["response"],
        }
        return await _elicit(ctx, message, schema)

    @server.tool(description="Tests elicitation with default values per SEP-1034")
    async def test_elicitation_sep1034_defaults(ctx: Context) -> t.CallToolResult:
        properties = {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status",
                       "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        }  # fmt: skip
        schema = {"type": "object", "properties": properties, "required": []}
        return await _elicit(ctx, "Please review and update the form fields with defaults", schema)

    @server.tool(description="Tests elicitation with enum schema improvements per SEP-1330")
    async def test_elicitation_sep1330_enums(ctx: Context) -> t.CallToolResult:
        options = {"type": "string", "enum": ["option1", "option2", "option3"]}
        titled = [
            {"const": f"value{i}", "title": n}
            for i, n in ((1, "First"), (2, "Second"), (3, "Third"))
        ]
        choices = [{**o, "title": o["title"] + " Choice"} for o in titled]
        properties = {
            "untitledSingle": {"type": "string", "description": "Select one option",
                               "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Select one option with titles",
                             "oneOf": [{**o, "title": o["title"] + " Option"} for o in titled]},
            "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                           "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Select multiple options",
                              "minItems": 1, "maxItems": 3,
                              "items": options},
            "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                            "minItems": 1, "maxItems": 3,
                            "items": {"anyOf": choices}},
        }  # fmt: skip
        schema = {"type": "object", "properties": properties, "required": []}
        return await _elicit(ctx, "Please select options from the enum fields", schema)


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> t.CallToolResult:
    answer = await ctx.request_context.session.elicit(
        message, schema, related_request_id=ctx.request_id
    )  # type: ignore[arg-type]
    content = json.dumps(answer.content or {}, separators=(",", ":"))
    return _result(_text(f"Elicitation completed: action={answer.action}, content={content}"))


def _embedded(uri: str, text: str, mime: str = "text/plain") -> t.EmbeddedResource:
    resource = t.TextResourceContents(uri=uri, mime_type=mime, text=text)
    return t.EmbeddedResource(type="resource", resource=resource)


def _resources(server: MCPServer) -> None:
    @server.resource("test://static-text", name="static-text", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", name="static-binary", mime_type="image/png")
    def static_binary() -> bytes:
        import base64

        return base64.b64decode(IMAGE)

    @server.resource("test://template/{id}/data", name="template", mime_type="application/json")
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
    def watched() -> str:
        return "Watched resource content"


def _prompts(server: MCPServer) -> None:
    @server.prompt(name="test_simple_prompt", description="A simple prompt without arguments")
    def simple() -> str:
        return "This is a simple prompt for testing."

    @server.prompt(
        name="test_prompt_with_arguments", description="A prompt with required arguments"
    )
    def with_arguments(arg1: str, arg2: str) -> str:
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt(
        name="test_prompt_with_embedded_resource", description="A prompt with a resource"
    )
    def with_resource(resourceUri: str) -> list[Message]:
        embedded = _embedded(resourceUri, "Embedded resource content for testing.")
        return [
            UserMessage(embedded),
            UserMessage("Please process the embedded resource above."),
        ]

    @server.prompt(
        name="test_prompt_with_image", description="A prompt that includes image content"
    )
    def with_image() -> list[Message]:
        image = t.ImageContent(type="image", data=IMAGE, mime_type="image/png")
        return [
            UserMessage(image),
            UserMessage("Please analyze the image above."),
        ]


if __name__ == "__main__":
    build().run("streamable-http", port=int(sys.argv[1]))
