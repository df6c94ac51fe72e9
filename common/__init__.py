"""toolspan: make LLM agents' tool calls safe to retry and easy to see.

The parts, each importable alone: ``toolspan.tracer`` (the retry boundary,
on opentelemetry-api only), ``toolspan.analyzer`` (DuckDB over trace files),
``toolspan.dashboard`` (Streamlit over the analyzer). ``toolspan.__version__``
is the installed version; ``ToolspanError`` is the root of every error
toolspan raises (the tree: ``common/_errors.py``).
"""

from __future__ import annotations

from ._errors import ToolspanError

__all__ = ["ToolspanError", "__version__"]


def __getattr__(name: str) -> str:
    # Read on first use (as stamina does): importing a part costs no metadata lookup.
    if name == "__version__":
        from ._version import __version__

        return __version__
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
