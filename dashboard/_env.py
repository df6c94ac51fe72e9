"""Environment variables the launcher sets for the app process (no Streamlit import)."""

from __future__ import annotations

__all__ = ["DB_ENV", "LIVE_ENV", "SOURCE_ENV", "STORE_ENV", "TIME_LIMIT_ENV"]

# The database the app opens read-only.
DB_ENV = "TOOLSPAN_DASHBOARD_DB"
# A ClickHouse source instead (JSON of dashboard._clickhouse.SourceSpec).
SOURCE_ENV = "TOOLSPAN_DASHBOARD_SOURCE"
# The SQL console's time limit in seconds (default: SandboxLimits.time_limit_s).
TIME_LIMIT_ENV = "TOOLSPAN_DASHBOARD_TIME_LIMIT_S"
# Live mode: the directory where `toolspan serve` publishes database copies.
LIVE_ENV = "TOOLSPAN_DASHBOARD_LIVE"
# The shared store whose quarantines the Quarantines page lists and lifts
# (`toolspan dashboard --store`, `toolspan serve --enforce`); a person may set it too.
STORE_ENV = "TOOLSPAN_STORE"
