"""Adapters that translate real client failures into :class:`ToolError`.

The executor applies :func:`to_tool_error` to every exception a tool raises:
a ``ToolError`` passes through, known transport failures are mapped, and
anything else (``TypeError``, ``KeyError``...) is a programming error that
is never retried.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from ._errors import ToolError
from ._policy import parse_retry_after

if TYPE_CHECKING:
    import httpx

__all__ = ["from_httpx", "from_httpx_response", "raise_for_httpx_status", "to_tool_error"]


def to_tool_error(exc: BaseException) -> ToolError | None:
    """The classified failure for ``exc``, or ``None`` for programming errors."""
    if isinstance(exc, ToolError):
        return exc
    if "httpx" in sys.modules:  # only look when the app uses httpx at all
        mapped = from_httpx(exc)
        if mapped is not None:
            return mapped
    if isinstance(exc, TimeoutError):
        return ToolError("timeout", "the operation timed out")
    if isinstance(exc, ConnectionError):
        return ToolError("connection_error", f"connection failed: {type(exc).__name__}")
    return None


def from_httpx(exc: BaseException) -> ToolError | None:
    """Map an httpx exception: timeouts, transport errors, status errors."""
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return ToolError("timeout", f"request timed out ({type(exc).__name__})")
    if isinstance(exc, httpx.HTTPStatusError):
        return from_httpx_response(exc.response)
    if isinstance(exc, httpx.TransportError):
        return ToolError("connection_error", f"transport error ({type(exc).__name__})")
    return None


def from_httpx_response(response: httpx.Response, *, now: float | None = None) -> ToolError:
    """A failed response as a ``ToolError`` with its validated Retry-After."""
    retry_after = parse_retry_after(
        response.headers.get("retry-after"), now=time.time() if now is None else now
    )
    reason = response.reason_phrase or "error"
    return ToolError.from_status(
        response.status_code,
        f"HTTP {response.status_code} {reason}",
        retry_after_s=retry_after,
    )


def raise_for_httpx_status(response: httpx.Response) -> Any:
    """Raise a ``ToolError`` for a 4xx/5xx response; return the JSON body otherwise."""
    if response.is_error:
        raise from_httpx_response(response)
    return response.json()
