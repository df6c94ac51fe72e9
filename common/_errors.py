"""Every error toolspan raises, in one tree (as httpx's ``_exceptions.py`` draws its own).

Catch ``ToolspanError`` to catch anything toolspan raises; catch a part's base
to catch that part's errors. Each part re-exports its own branch, so
``toolspan.tracer.ToolError``, ``toolspan.tracer.store.StoreError``,
``toolspan.analyzer.QueryError`` and ``toolspan.dashboard.QueryRefused`` are
these very classes::

    ToolspanError                 the root
    ├── ConfigurationError        tracer: a tool, policy, executor or store declared wrongly
    ├── ToolError                 tracer: a classified tool failure (what the retry policy sees)
    ├── StoreError                tracer.store: an idempotency-store backend failed
    ├── AnalyzerError             analyzer: the base of its errors
    │   ├── InputError            a path that does not exist, or holds no trace files
    │   ├── CorruptInputError     corrupt lines found while ingesting with strict=True
    │   ├── QueryError            a SQL query failed
    │   └── DatabaseError         the DuckDB database could not be opened or written
    ├── DashboardError            dashboard: the base of its errors, shown to the user as is
    │   ├── QuarantineStoreError  the Quarantines page's store cannot be opened, read or written
    │   ├── QueryRefused          the SQL console will not run this statement
    │   ├── QueryTimeout          the query ran past the time limit
    │   └── QueryFailed           DuckDB rejected the query
    │       ├── QueryMemoryExceeded  the query used more memory than the console allows
    │       └── ResultTooLarge    the result is more bytes than the console takes
    └── ServeError                serve: the receiver cannot start, store or take a request
        ├── BadRequest            no ExportTraceServiceRequest (HTTP 400, gRPC INVALID_ARGUMENT)
        ├── TooLarge              a body over the limit, compressed or not (HTTP 413)
        └── Overloaded            the spool is full or the analyser lags: retry later

``ConfigurationError`` is also a ``ValueError``. A ``ToolError`` never escapes
``Executor.execute``: it becomes a structured ``ToolResult``. Any other
exception a tool raises (``TypeError``, ``KeyError``, ...) is a programming
error: it is recorded on the spans and propagates unchanged. Calling an API
with arguments of the wrong type or value raises the built-in ``TypeError``
or ``ValueError``, as the standard library does. Errors wrap their cause
(``raise ... from exc``), and their messages never carry secrets or stored
results. ``tests/shared/test_errors.py`` checks that this drawing is the tree.

This module imports nothing: the tracer core stays light.
"""

from __future__ import annotations

__all__ = [
    "AnalyzerError",
    "BadRequest",
    "ConfigurationError",
    "CorruptInputError",
    "DashboardError",
    "DatabaseError",
    "InputError",
    "Overloaded",
    "QuarantineStoreError",
    "QueryError",
    "QueryFailed",
    "QueryMemoryExceeded",
    "QueryRefused",
    "QueryTimeout",
    "ResultTooLarge",
    "ServeError",
    "StoreError",
    "TooLarge",
    "ToolError",
    "ToolspanError",
]


class ToolspanError(Exception):
    """Base class of every error toolspan raises."""


# -- tracer --------------------------------------------------------------------


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


class StoreError(ToolspanError):
    """A store backend failed (SQLite or Redis error, or guard state of the wrong kind).

    The backend's exception is the ``__cause__``. Messages name keys and operations,
    never stored results: those may hold secrets.
    """


# -- analyzer ------------------------------------------------------------------


class AnalyzerError(ToolspanError):
    """Base class of every error the analyzer raises."""


class InputError(AnalyzerError):
    """A path that does not exist, or an input that holds no trace files."""


class CorruptInputError(AnalyzerError):
    """Corrupt lines were found while ingesting with ``strict=True``."""


class QueryError(AnalyzerError):
    """A SQL query failed (syntax, unknown column, type error, ...)."""


class DatabaseError(AnalyzerError):
    """The DuckDB database could not be opened or written."""


# -- dashboard -----------------------------------------------------------------


class DashboardError(ToolspanError):
    """Base of every error the dashboard raises; its message is shown to the user as is."""


class QuarantineStoreError(DashboardError):
    """The Quarantines page's store could not be opened, read or written (its message says why)."""


class QueryRefused(DashboardError):
    """The SQL console will not run this statement (a write, a file, a setting...)."""


class QueryTimeout(DashboardError):
    """The query ran past the time limit and was interrupted."""


class QueryFailed(DashboardError):
    """DuckDB rejected the query (syntax, unknown table, out of memory...)."""


class QueryMemoryExceeded(QueryFailed):
    """The query used more memory than the console allows and was stopped."""


class ResultTooLarge(QueryFailed):
    """The query's result is more bytes than the console takes (whatever its rows)."""


# -- serve ---------------------------------------------------------------------


class ServeError(ToolspanError):
    """Base of every error ``toolspan serve`` raises (bad settings, a spool it cannot write)."""


class Overloaded(ServeError):
    """The spool cannot take more now: answered as "retry later" (HTTP 429/503,
    gRPC UNAVAILABLE), after ``retry_after_s`` seconds."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BadRequest(ServeError):
    """The body is no ExportTraceServiceRequest, or is not encoded as it says
    (HTTP 400, gRPC INVALID_ARGUMENT)."""


class TooLarge(ServeError):
    """The body, compressed or decompressed, is over the size limit (HTTP 413,
    gRPC RESOURCE_EXHAUSTED): a gzip bomb stops at the limit."""
