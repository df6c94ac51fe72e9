"""toolspan serve: an OTLP receiver (gRPC and HTTP) that spools what it
accepts, keeps a DuckDB database current from it, alerts on new findings and
serves the live dashboard.

>>> from pathlib import Path
>>> from toolspan.serve import Server, Settings
>>> with Server(Settings(directory=Path("toolspan-data"))) as server:  # doctest: +SKIP
...     ...  # export to http://127.0.0.1:4318 or 127.0.0.1:4317
"""

from .._errors import BadRequest, Overloaded, ServeError, TooLarge, ToolspanError
from ._server import Server, Settings
from ._spool import Spool

__all__ = [
    "BadRequest",
    "Overloaded",
    "ServeError",
    "Server",
    "Settings",
    "Spool",
    "TooLarge",
    "ToolspanError",
]
