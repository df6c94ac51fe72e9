"""Serving clients over streamable HTTP: one POST, one JSON-RPC message, one JSON answer.

Each POST's request gets an id of the proxy's own (clients on separate
connections may all use id 1) and its answer gets the client's id back. The
conversation comes from ``_meta`` or, when the config names one, a header.
The proxy answers with ``application/json`` and offers no SSE stream (``GET``
is ``405``), which the streamable HTTP transport allows: notifications the
upstream sends mid-request are not delivered to HTTP clients.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp_types import (
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._proxy import CONVERSATION_META_KEY, McpProxy

__all__ = ["http_app"]


def http_app(proxy: McpProxy, *, path: str = "/mcp") -> Starlette:
    """An ASGI app serving ``proxy`` at ``path`` (run it with uvicorn)."""
    ids = itertools.count(1)
    header = proxy.config.conversation_header

    async def endpoint(request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405, headers={"Allow": "POST"})
        try:
            message = jsonrpc_message_adapter.validate_json(await request.body(), by_name=False)
        except ValidationError as exc:
            error = ErrorData(code=PARSE_ERROR, message=f"not a JSON-RPC message: {exc.title}")
            return _json(JSONRPCError(jsonrpc="2.0", id=None, error=error), 400)
        if not isinstance(message, JSONRPCRequest):
            await proxy.handle(message, _nowhere)
            return Response(status_code=202)
        if header and request.headers.get(header):
            message = _with_conversation(message, request.headers[header])
        answered = anyio.Event()
        answers: list[JSONRPCMessage] = []

        async def reply(answer: JSONRPCMessage) -> None:
            answers.append(answer)
            answered.set()

        client_id = message.id
        await proxy.handle(message.model_copy(update={"id": f"http-{next(ids)}"}), reply)
        await answered.wait()
        (answer,) = answers
        return _json(answer.model_copy(update={"id": client_id}), 200)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with proxy.running():
            yield

    return Starlette(
        routes=[Route(path, endpoint, methods=["GET", "POST", "DELETE"])], lifespan=lifespan
    )


def _with_conversation(message: JSONRPCRequest, conversation: str) -> JSONRPCRequest:
    params = dict(message.params or {})
    meta = dict(params.get("_meta") or {})
    meta.setdefault(CONVERSATION_META_KEY, conversation)
    params["_meta"] = meta
    return message.model_copy(update={"params": params})


def _json(message: Any, status: int) -> Response:
    body = message.model_dump_json(by_alias=True, exclude_unset=True)
    return Response(body, status_code=status, media_type="application/json")


async def _nowhere(_message: JSONRPCMessage) -> None:
    """Notifications and responses from an HTTP client get no answer."""
