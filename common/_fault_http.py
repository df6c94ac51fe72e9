"""Fault-injecting transports for httpx and httpx2 (imported only when asked for).

Both libraries share one API, so one function builds either: a
``MockTransport`` whose handler runs each request through a
:class:`~toolspan._faults.FaultInjector` before (or instead of) the fake
service. A sync handler serves ``Client`` and ``AsyncClient`` alike. The
failures are the library's own exceptions, raised with the request, as its
real transport raises them: ``ReadTimeout``, ``ReadError`` (reset),
``RemoteProtocolError`` (a response that never came).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ._faults import Failures, Fault, FaultInjector, retry_after_value

__all__ = ["fault_transport"]


def fault_transport(library: str, service: Callable[[Any], Any], injector: FaultInjector) -> Any:
    """A ``MockTransport`` of ``library`` ("httpx" or "httpx2") serving ``service``."""
    if library not in ("httpx", "httpx2"):
        raise ValueError(f"no fault transport for {library!r}: use 'httpx' or 'httpx2'")
    http = importlib.import_module(library)  # an optional dependency: only now

    def handler(request: Any) -> Any:
        failures = Failures(
            timeout=lambda message: http.ReadTimeout(message, request=request),
            reset=lambda message: http.ReadError(message, request=request),
            lost=lambda message: http.RemoteProtocolError(message, request=request),
        )

        def refuse(fault: Fault) -> Any:
            headers = {}
            value = retry_after_value(fault, injector.wall)
            if value is not None:
                headers["Retry-After"] = value
            body = {"error": f"HTTP {fault.status} (injected by toolspan.testing)"}
            return http.Response(fault.status, headers=headers, json=body)

        describe = f"{request.method} {request.url.path}"
        return injector.handle(request, describe, lambda: service(request), refuse, failures)

    return http.MockTransport(handler)
