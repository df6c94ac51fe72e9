"""Adapters that translate real client failures into :class:`ToolError`.

The executor applies :func:`to_tool_error` to every exception a tool raises:
a ``ToolError`` passes through, known transport failures are mapped, and
anything else (``TypeError``, ``KeyError``...) is a programming error that
is never retried.

The httpx helpers speak both ``httpx`` and ``httpx2`` (the fork the OpenAI and
Anthropic SDKs are built on), so a program needs one HTTP library: whichever
it uses. Neither is imported here; an exception is matched against the ones
the program has loaded.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias

from ._current import current_call
from ._errors import ConfigurationError, ToolError
from ._policy import parse_retry_after

if TYPE_CHECKING:
    import httpx
    import httpx2

    Response: TypeAlias = httpx.Response | httpx2.Response
    Request: TypeAlias = httpx.Request | httpx2.Request

__all__ = [
    "from_httpx",
    "from_httpx_response",
    "raise_for_httpx_status",
    "send_idempotency_key",
    "send_idempotency_key_async",
    "to_tool_error",
]

# The HTTP libraries whose exceptions are mapped: httpx and its fork httpx2.
_HTTP_LIBRARIES = ("httpx", "httpx2")

# An HTTP field name (RFC 9110 "token").
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def to_tool_error(exc: BaseException) -> ToolError | None:
    """The classified failure for ``exc``, or ``None`` for programming errors."""
    if isinstance(exc, ToolError):
        return exc
    mapped = from_httpx(exc)  # None at once when the app loaded neither library
    if mapped is not None:
        return mapped
    if isinstance(exc, TimeoutError):
        return ToolError("timeout", "the operation timed out")
    if isinstance(exc, ConnectionError):
        return ToolError("connection_error", f"connection failed: {type(exc).__name__}")
    return None


def from_httpx(exc: BaseException) -> ToolError | None:
    """Map an httpx or httpx2 exception: timeouts, transport errors, status errors."""
    for library in _loaded_http_libraries():
        if isinstance(exc, library.TimeoutException):
            return ToolError("timeout", f"request timed out ({type(exc).__name__})")
        if isinstance(exc, library.HTTPStatusError):
            return from_httpx_response(exc.response)
        if isinstance(exc, library.TransportError):
            return ToolError("connection_error", f"transport error ({type(exc).__name__})")
    return None


def _loaded_http_libraries() -> list[ModuleType]:
    """httpx and httpx2 as far as the program imported them (an exception of a
    library that was never imported cannot exist)."""
    return [sys.modules[name] for name in _HTTP_LIBRARIES if name in sys.modules]


def from_httpx_response(response: Response, *, now: float | None = None) -> ToolError:
    """A failed httpx or httpx2 response as a ``ToolError`` with its validated Retry-After."""
    retry_after = parse_retry_after(
        response.headers.get("retry-after"), now=time.time() if now is None else now
    )
    reason = response.reason_phrase or "error"
    return ToolError.from_status(
        response.status_code,
        f"HTTP {response.status_code} {reason}",
        retry_after_s=retry_after,
    )


def raise_for_httpx_status(response: Response) -> Any:
    """Raise a ``ToolError`` for a 4xx/5xx response (httpx or httpx2); return the JSON body
    otherwise."""
    if response.is_error:
        raise from_httpx_response(response)
    return response.json()


def send_idempotency_key(header: str = "Idempotency-Key") -> Callable[[Request], None]:
    """An httpx (or httpx2) request hook that sends the current call's idempotency key.

    ``httpx.Client(event_hooks={"request": [send_idempotency_key()]})`` (or
    ``httpx2.Client``) adds
    ``header`` with the key of the tool call being executed to every request a
    tool makes during that call; nothing outside a call or for an unkeyed call.
    Declare the tool with ``key_passed="Idempotency-Key header"``.
    """
    _check_header(header)

    def add_key(request: Request) -> None:
        call = current_call()
        if call is not None and call.idempotency_key:
            request.headers[header] = call.idempotency_key

    return add_key


def send_idempotency_key_async(
    header: str = "Idempotency-Key",
) -> Callable[[Request], Awaitable[None]]:
    """:func:`send_idempotency_key` for ``httpx.AsyncClient`` (or ``httpx2.AsyncClient``),
    which awaits its hooks."""
    add_key = send_idempotency_key(header)

    async def add_key_async(request: Request) -> None:
        add_key(request)

    return add_key_async


def _check_header(header: str) -> None:
    if not isinstance(header, str) or not _HEADER_NAME.fullmatch(header):
        raise ConfigurationError(f"not an HTTP header name: {header!r}")
