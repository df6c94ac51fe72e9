"""The tracer's version (its instrumentation scope's): toolspan's, from its metadata."""

from __future__ import annotations

from .._version import __version__

__all__ = ["__version__"]
