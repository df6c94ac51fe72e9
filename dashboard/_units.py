"""Sizes as people read them: binary units, at most three significant digits."""

from __future__ import annotations

__all__ = ["human_size"]

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_size(n_bytes: float) -> str:
    """``32 * 2**20`` is "32 MiB", ``1536`` is "1.5 KiB", ``512`` is "512 bytes"."""
    size = float(n_bytes)
    unit = 0
    while abs(size) >= 1024 and unit < len(_UNITS) - 1:
        size /= 1024
        unit += 1
    if unit == 0:
        return f"{int(size)} bytes"
    shown = f"{size:.0f}" if abs(size) >= 100 else f"{size:.3g}"
    return f"{shown} {_UNITS[unit]}"
