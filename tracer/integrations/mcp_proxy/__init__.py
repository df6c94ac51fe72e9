"""``toolspan mcp proxy``: the retry boundary in front of any MCP server, for any MCP client.

Extra ``toolspan[mcp]``. The client launches the proxy instead of the server
(a one-line change in its config); the proxy launches (or connects to) the
server and runs every ``tools/call`` through toolspan's executor, relaying
everything else unchanged. See ``docs/mcp-proxy.md``::

    toolspan mcp proxy --config proxy.toml -- python -m my_server
    toolspan mcp proxy --upstream http://127.0.0.1:8000/mcp --serve http --port 8100

In Python, :class:`McpProxy` over a :data:`Connect` (:func:`stdio_upstream`,
:func:`http_upstream`), with a :class:`ProxyConfig` from :func:`load_config`.
"""

from __future__ import annotations

from ._config import ProxyConfig, ToolConfig, load_config, parse_config
from ._http import http_app
from ._proxy import CONVERSATION_META_KEY, REQUEST_META_KEY, RESULT_META_KEY, McpProxy, Reply
from ._upstream import Connect, http_upstream, stdio_upstream

__all__ = [
    "CONVERSATION_META_KEY",
    "REQUEST_META_KEY",
    "RESULT_META_KEY",
    "Connect",
    "McpProxy",
    "ProxyConfig",
    "Reply",
    "ToolConfig",
    "http_app",
    "http_upstream",
    "load_config",
    "parse_config",
    "stdio_upstream",
]
