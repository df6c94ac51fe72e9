"""The version of toolspan, kept in one place: pyproject.toml.

Read from the installed distribution's metadata (as stamina does), so a
release changes one line. The parts live inside the installed ``toolspan``
package, so there is always metadata to read.
"""

from __future__ import annotations

from importlib.metadata import version

__all__ = ["__version__"]

__version__ = version("toolspan")
