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
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
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

            app = http_app(
                proxy, allowed_hosts=allowed_hosts or (), allowed_origins=allowed_origins or ()
            )
            uvicorn.run(app, host=host, port=port, log_level="warning")
        else:
            # A client may end the proxy with SIGTERM once it closed its side: keep
            # the spans, and take the server along (it may be in its grace period).
            signal.signal(signal.SIGTERM, lambda *_: _stop_now(telemetry.shutdown))
            anyio.run(_serve_stdio, proxy, telemetry.force_flush)
    finally:
        telemetry.shutdown()
    return 0


def _stop_now(shutdown: Callable[[], object]) -> None:
    from ._stdio import terminate_servers

    terminate_servers()
    shutdown()
    os._exit(0)


async def _serve_stdio(proxy: McpProxy, flush: Callable[[], object]) -> None:
    from ._stdio import stdio_streams

    async with stdio_streams() as (read, write):
        await proxy.serve(read, write, closed=flush)
