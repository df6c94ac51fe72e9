"""An MCP server that misbehaves on purpose: raw JSON-RPC on stdio, no SDK.

``python hostile_mcp_server.py MODE [ARG]`` answers the initialize handshake
properly and then, by MODE, lists tools in a hostile way:

- ``tools``: the tools below, each answering ``tools/call`` badly;
- ``cursor-repeat``: every ``tools/list`` page names the same next cursor;
- ``cursor-new``: every page names a new cursor (and a new tool), for ever;
- ``ref ARG``: one tool whose ``inputSchema`` has ``$ref`` to ARG (a URL).

``tools linger``: as ``tools``, but slow to go: it stays 60 s after its stdin
closed (until a signal ends it).

Tools of ``tools`` mode: ``huge_error`` (an ``isError`` result of 2 MB of
text), ``big_int`` (structured content with an integer past 64 bits),
``bad_type`` (a content block of an unknown type), ``bad_flag``
(``isError: "maybe"``), ``silent`` (never answers), ``echo`` (answers well).
Standard library only, so it starts in a few milliseconds.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

OBJECT = {"type": "object"}
TOOLS = ["huge_error", "big_int", "bad_type", "bad_flag", "silent", "echo"]


def tool(name: str, schema: dict[str, Any] = OBJECT) -> dict[str, Any]:
    return {"name": name, "description": f"{name}, on purpose", "inputSchema": schema}


def listing(mode: str, arg: str, params: dict[str, Any]) -> dict[str, Any]:
    if mode == "cursor-repeat":
        return {"tools": [tool("looping")], "nextCursor": "again"}
    if mode == "cursor-new":
        page = int(str(params.get("cursor") or "c0").removeprefix("c")) + 1
        return {"tools": [tool(f"t{page}")], "nextCursor": f"c{page}"}
    if mode == "ref":
        schema = {"type": "object", "properties": {"x": {"$ref": arg}}}
        return {"tools": [tool("lookup", schema)]}
    return {"tools": [tool(name) for name in TOOLS]}


def call(name: str) -> dict[str, Any] | None:
    text = [{"type": "text", "text": "done"}]
    if name == "huge_error":
        return {"content": [{"type": "text", "text": "x" * 2_000_000 + "END"}], "isError": True}
    if name == "big_int":
        # Written by hand: json.dumps would write the same digits; no float rounding.
        return {"content": text, "structuredContent": {"n": 2**70}}
    if name == "bad_type":
        return {"content": [{"type": "hologram", "beam": 1}]}
    if name == "bad_flag":
        return {"content": text, "isError": "maybe"}
    if name == "silent":
        return None
    return {"content": text, "structuredContent": {"echo": True}}


def answer(message: dict[str, Any], mode: str, arg: str) -> dict[str, Any] | None:
    method, params = message.get("method"), message.get("params") or {}
    if "id" not in message:
        return None  # a notification
    if method == "initialize":
        result: dict[str, Any] | None = {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "0"},
        }
    elif method == "tools/list":
        result = listing(mode, arg, params)
    elif method == "tools/call":
        result = call(str(params.get("name")))
        if result is None:
            return None
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    mode = sys.argv[1]
    arg = sys.argv[2] if len(sys.argv) > 2 else ""
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line), mode, arg)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    if arg == "linger":
        time.sleep(60)


if __name__ == "__main__":
    main()
