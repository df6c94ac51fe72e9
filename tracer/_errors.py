"""One exception tree for the tracer, documented in one place.

``ToolspanError``
    Base of everything toolspan raises.
``ConfigurationError``
    A tool or executor was declared wrongly (caught at declaration time).
``ToolError``
    A tool *failure* the retry policy can reason about: a machine-readable
    ``code`` (``timeout``, ``http_503``, ...), an optional server-requested
    delay and HTTP status. Tool functions raise it (or an exception an
    adapter maps to it); it never escapes :meth:`Executor.execute`, which
    turns it into a structured :class:`ToolResult`.

Any other exception raised by a tool (``TypeError``, ``KeyError``, ...) is a
programming error: it is recorded on the spans and propagates unchanged.
"""

from __future__ import annotations

__all__ = ["ConfigurationError", "ToolError", "ToolspanError"]


class ToolspanError(Exception):
    """Base class of every error toolspan raises."""


class ConfigurationError(ToolspanError, ValueError):
    """A tool, policy or executor was declared with invalid settings."""


class ToolError(ToolspanError):
    """A classified tool failure: what the retry policy sees.

    ``code`` is machine-readable (``timeout``, ``connection_error``,
    ``http_<status>``, or any code of your own). ``retry_after_s`` is a
    server-requested delay already validated (see
    :func:`toolspan.tracer.parse_retry_after`); ``None`` when there was none.
    """

    def __init__(
        self,
        code: str,
        message: str = "",
        *,
        retry_after_s: float | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message or code)
        self.code = code
        self.message = message or code
        self.retry_after_s = retry_after_s
        self.status_code = status_code

    @classmethod
    def from_status(
        cls,
        status_code: int,
        message: str = "",
        *,
        retry_after_s: float | None = None,
    ) -> ToolError:
        """An HTTP status as a tool failure with code ``http_<status>``."""
        return cls(
            f"http_{status_code}",
            message or f"HTTP {status_code}",
            retry_after_s=retry_after_s,
            status_code=status_code,
        )

    def __repr__(self) -> str:
        return f"ToolError(code={self.code!r}, retry_after_s={self.retry_after_s!r})"
