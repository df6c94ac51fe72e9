"""toolspan dashboard: a Streamlit app over the analyzer's database.

Importing this package pulls in DuckDB but not Streamlit; Streamlit is only
imported by the app itself, which runs in its own process.
"""

from .._errors import ToolspanError
from ._errors import (
    DashboardError,
    QuarantineStoreError,
    QueryFailed,
    QueryMemoryExceeded,
    QueryRefused,
    QueryTimeout,
    ResultTooLarge,
)
from ._launch import launch
from ._sandbox import SandboxLimits, SandboxResult, SqlSandbox, open_database

__all__ = [
    "DashboardError",
    "QuarantineStoreError",
    "QueryFailed",
    "QueryMemoryExceeded",
    "QueryRefused",
    "QueryTimeout",
    "ResultTooLarge",
    "SandboxLimits",
    "SandboxResult",
    "SqlSandbox",
    "ToolspanError",
    "launch",
    "open_database",
]
