"""Adapters that translate real client failures into :class:`ToolError`.

The executor applies :func:`to_tool_error` to every exception a tool raises:
a ``ToolError`` passes through, known transport failures are mapped, and
anything else (``TypeError``, ``KeyError``...) is a programming error that
is never retried.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ._current import current_call
from ._errors import ConfigurationError, ToolError
from ._policy import parse_retry_after

if TYPE_CHECKING:
    import httpx

__all__ = [
    "from_httpx",
    "from_httpx_response",
    "raise_for_httpx_status",
    "send_idempotency_key",
    "send_idempotency_key_async",
    "to_tool_error",
]

# An HTTP field name (RFC 9110 "token").
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


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


def send_idempotency_key(header: str = "Idempotency-Key") -> Callable[[httpx.Request], None]:
    """An httpx request hook that sends the current call's idempotency key.

    ``httpx.Client(event_hooks={"request": [send_idempotency_key()]})`` adds
    ``header`` with the key of the tool call being executed to every request a
    tool makes during that call; nothing outside a call or for an unkeyed call.
    Declare the tool with ``key_passed="Idempotency-Key header"``.
    """
    _check_header(header)

    def add_key(request: httpx.Request) -> None:
        call = current_call()
        if call is not None and call.idempotency_key:
            request.headers[header] = call.idempotency_key

    return add_key


def send_idempotency_key_async(
    header: str = "Idempotency-Key",
) -> Callable[[httpx.Request], Awaitable[None]]:
    """:func:`send_idempotency_key` for ``httpx.AsyncClient``, which awaits its hooks."""
    add_key = send_idempotency_key(header)

    async def add_key_async(request: httpx.Request) -> None:
        add_key(request)

    return add_key_async


def _check_header(header: str) -> None:
    if not isinstance(header, str) or not _HEADER_NAME.fullmatch(header):
        raise ConfigurationError(f"not an HTTP header name: {header!r}")
