"""A client that knows nothing of toolspan, behind ``toolspan mcp proxy``.

    python -m examples.mcp_proxy [--out out/mcp_proxy.jsonl]

``examples/mcp_proxy_client.json`` is the server entry a desktop client or an
IDE would hold: instead of ``python -m examples.mcp_server`` it launches the
proxy, which launches the server (the one-line change). This script plays
that client with the real ``mcp`` SDK over stdio and a scripted session: a
flaky read retried, a keyed refund whose answer was lost retried under its
key, a cancel whose answer was lost refused when repeated until the check
tool answered. Exit status 0 when every answer is what the boundary promises.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from toolspan.tracer.integrations.mcp_proxy import CONVERSATION_META_KEY

REPO = Path(__file__).resolve().parents[1]
CLIENT_CONFIG = REPO / "examples" / "mcp_proxy_client.json"
META = {CONVERSATION_META_KEY: "support-chat-1"}

# (tool, arguments, the status the client gets)
SESSION: list[tuple[str, dict[str, Any], str]] = [
    ("get_order", {"order_id": "A-1001"}, "succeeded"),  # 503 first: retried
    (
        "refund_order",
        {"order_id": "A-1001", "amount_cents": 4900, "reason": "arrived broken"},
        "succeeded",  # the answer was lost: retried under the same key, refunded once
    ),
    ("cancel_order", {"order_id": "A-1002"}, "unsafe_retry"),  # lost: not repeated
    ("cancel_order", {"order_id": "A-1002"}, "read_back_required"),  # the client insists
    ("get_cancellation", {"order_id": "A-1002"}, "succeeded"),  # the check: it happened
]


def server_entry(trace_file: str | None) -> StdioServerParameters:
    """The client config's server entry, with ``toolspan``/``python`` of this environment."""
    entry = json.loads(CLIENT_CONFIG.read_text())["mcpServers"]["support-desk"]
    command, args = entry["command"], list(entry["args"])
    if command == "toolspan" and shutil.which("toolspan") is None:
        command, args = sys.executable, ["-m", "toolspan.cli", *args]
    args = [sys.executable if a == "python" else a for a in args]
    if trace_file:
        after = args.index("proxy") + 1
        args[after:after] = ["--trace-file", trace_file]
    return StdioServerParameters(command=command, args=args, cwd=str(REPO))


async def run(trace_file: str | None) -> list[tuple[str, str]]:
    """Play the session; each call's tool and the status toolspan gave it."""
    seen: list[tuple[str, str]] = []
    async with Client(server_entry(trace_file), mode="legacy") as client:
        for name, arguments, _expected in SESSION:
            result = await client.call_tool(name, arguments, meta=META)
            summary = (result.meta or {}).get("toolspan/result") or result.structured_content
            status = summary["status"]
            print(f"{name:<17} {status:<19} {summary.get('message', '')[:70]}")
            seen.append((name, status))
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default="out/mcp_proxy.jsonl", help="the proxy appends its spans here (OTLP/JSON)"
    )
    args = parser.parse_args(argv)
    seen = anyio.run(run, args.out)
    expected = [(name, status) for name, _, status in SESSION]
    if seen != expected:
        print(f"unexpected answers: {seen} (expected {expected})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
