"""The tracer's branch of toolspan's one exception tree (drawn in ``common/_errors.py``).

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
``StoreError``
    An idempotency-store backend failed (exported by ``toolspan.tracer.store``).

Any other exception raised by a tool (``TypeError``, ``KeyError``, ...) is a
programming error: it is recorded on the spans and propagates unchanged.
"""

from __future__ import annotations

from .._errors import ConfigurationError, StoreError, ToolError, ToolspanError

__all__ = ["ConfigurationError", "StoreError", "ToolError", "ToolspanError"]
