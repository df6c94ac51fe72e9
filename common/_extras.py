"""The one line that tells a user how to install an extra they lack."""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """``pip install`` of ``extra``: toolspan is not on the package index yet, so
    the line names the clone's form too (a wheel takes ``toolspan[extra] @ file:...``)."""
    return f"pip install 'toolspan[{extra}]' (in a clone of toolspan: pip install '.[{extra}]')"
