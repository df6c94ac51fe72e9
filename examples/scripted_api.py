"""A scripted model behind the real OpenAI and Anthropic SDK clients.

The SDKs are built on ``httpx2``; their clients take an ``http_client``, and
``httpx2.MockTransport`` answers its requests in process. So the SDK's own
request building, validation and response parsing all run, and only the
model is scripted: :class:`ScriptedAPI` answers each request with the next
planned turn in the API's wire format (Chat Completions, Responses or
Anthropic Messages). Like the real APIs it refuses (HTTP 400) a request in
which a tool call of the previous turn has no result, and it records every
request body so tests can check what the SDK really sent.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx2

from .agent import Planned, Request

if TYPE_CHECKING:
    # Each SDK is imported by the client that needs it: the OpenAI examples
    # run without the anthropic package, and the Anthropic one without openai.
    import anthropic
    import openai

__all__ = ["API", "ScriptedAPI"]

API = Literal["chat", "responses", "anthropic"]

_PATHS: dict[API, str] = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
}
MODEL = "scripted-model"


@dataclass
class ScriptedAPI:
    """Answers an SDK client's HTTP requests from a script of planned turns."""

    api: API
    requests: Sequence[Request]
    id_prefix: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _script: Iterator[tuple[Sequence[Planned], str]] = field(init=False)

    def __post_init__(self) -> None:
        self._script = iter(
            [(turn, request.answer) for request in self.requests for turn in [*request.turns, []]]
        )

    # -- the clients ------------------------------------------------------------------

    def http_client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self.handle))

    def openai_client(self) -> openai.OpenAI:
        import openai

        return openai.OpenAI(
            api_key="sk-scripted",
            base_url="http://model.invalid/v1",
            http_client=self.http_client(),
            max_retries=0,
        )

    def async_openai_client(self) -> openai.AsyncOpenAI:
        import openai

        return openai.AsyncOpenAI(
            api_key="sk-scripted",
            base_url="http://model.invalid/v1",
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)),
            max_retries=0,
        )

    def anthropic_client(self) -> anthropic.Anthropic:
        import anthropic

        return anthropic.Anthropic(
            api_key="sk-ant-scripted",
            base_url="http://model.invalid",
            http_client=self.http_client(),
            max_retries=0,
        )

    # -- the transport ----------------------------------------------------------------

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or request.url.path != _PATHS[self.api]:
            return httpx2.Response(404, json={"error": {"message": f"no route {request.url.path}"}})
        body = json.loads(request.content)
        self.bodies.append(body)
        missing = self._unanswered(body)
        if missing:
            message = f"tool calls without a result: {', '.join(missing)}"
            return httpx2.Response(400, json=_error(self.api, message))
        try:
            planned, final = next(self._script)
        except StopIteration:
            return httpx2.Response(400, json=_error(self.api, "the script has no more turns"))
        return httpx2.Response(200, json=self._reply(planned, final))

    def _unanswered(self, body: dict[str, Any]) -> list[str]:
        """Call ids the previous turn asked for that this request does not answer."""
        if self.api == "chat":
            asked = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
            answered = {m["tool_call_id"] for m in body["messages"] if m.get("role") == "tool"}
        elif self.api == "responses":
            items = body["input"] if isinstance(body["input"], list) else []
            asked = [i["call_id"] for i in items if i.get("type") == "function_call"]
            answered = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
        else:
            blocks = [b for m in body["messages"] if isinstance(m["content"], list)
                      for b in m["content"]]  # fmt: skip
            asked = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            answered = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        return [call_id for call_id in asked if call_id not in answered]

    def _next_id(self) -> str:
        return f"{self.id_prefix}{next(self._ids):04d}"

    def _reply(self, planned: Sequence[Planned], final: str) -> dict[str, Any]:
        if self.api == "chat":
            return self._chat(planned, final)
        if self.api == "responses":
            return self._responses(planned, final)
        return self._anthropic(planned, final)

    def _chat(self, planned: Sequence[Planned], final: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None if planned else final}
        if planned:
            message["tool_calls"] = [
                {
                    "id": f"call_{self._next_id()}",
                    "type": "function",
                    "function": {"name": p.tool, "arguments": json.dumps(p.arguments)},
                }
                for p in planned
            ]
        return {
            "id": f"chatcmpl-{self._next_id()}",
            "object": "chat.completion",
            "created": 1_767_225_600,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if planned else "stop",
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 24, "total_tokens": 144},
        }

    def _responses(self, planned: Sequence[Planned], final: str) -> dict[str, Any]:
        output: list[dict[str, Any]] = [
            {
                "type": "function_call",
                "id": f"fc_{self._next_id()}",
                "call_id": f"call_{self._next_id()}",
                "name": p.tool,
                "arguments": json.dumps(p.arguments),
                "status": "completed",
            }
            for p in planned
        ]
        if not planned:
            output = [
                {
                    "type": "message",
                    "id": f"msg_{self._next_id()}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": final, "annotations": []}],
                }
            ]
        return {
            "id": f"resp_{self._next_id()}",
            "object": "response",
            "created_at": 1_767_225_600,
            "model": MODEL,
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    def _anthropic(self, planned: Sequence[Planned], final: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{self._next_id()}", "name": p.tool,
             "input": p.arguments}
            for p in planned
        ] or [{"type": "text", "text": final}]  # fmt: skip
        return {
            "id": f"msg_{self._next_id()}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": "tool_use" if planned else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 120, "output_tokens": 24},
        }


def _error(api: API, message: str) -> dict[str, Any]:
    if api == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
