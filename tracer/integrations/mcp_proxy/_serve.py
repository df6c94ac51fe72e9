"""Running the proxy as a process: telemetry, the upstream, stdio or HTTP serving."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import anyio

from ..._setup import setup_telemetry
from ._config import ProxyConfig
from ._proxy import McpProxy
from ._upstream import http_upstream, stdio_upstream

__all__ = ["serve"]


def serve(
    *,
    config: ProxyConfig,
    command: list[str],
    url: str | None,
    serve_http: bool,
    host: str,
    port: int,
    trace_file: str | None,
) -> int:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP)."""
    telemetry = setup_telemetry("toolspan-mcp-proxy", json_path=trace_file, set_global=False)
    try:
        connect = http_upstream(url) if url else stdio_upstream(command[0], command[1:])
        proxy = McpProxy(
            connect,
            config,
            http_upstream=url is not None,
            tracer_provider=telemetry.tracer_provider,
            service=url or command[0],
        )
        if serve_http:
            import uvicorn

            from ._http import http_app

            uvicorn.run(http_app(proxy), host=host, port=port, log_level="warning")
        else:
            # A client may end the proxy with SIGTERM once it closed its side: keep the spans.
            signal.signal(signal.SIGTERM, lambda *_: (telemetry.shutdown(), os._exit(0)))
            anyio.run(_serve_stdio, proxy, telemetry.force_flush)
    finally:
        telemetry.shutdown()
    return 0


async def _serve_stdio(proxy: McpProxy, flush: Callable[[], object]) -> None:
    from ._stdio import stdio_streams

    async with stdio_streams() as (read, write):
        await proxy.serve(read, write, closed=flush)
