"""The collector's ClickHouse exporter table, for tests and benchmarks: its
DDL and value mapping live in the package (``toolspan serve --clickhouse``
writes with them)."""

from toolspan.analyzer._exporter_table import (
    COLUMNS,
    EXPORTER_COMMIT,
    LAYOUTS,
    TRACES_DDL,
    TRACES_JSON_DDL,
    as_string,
    create_table,
    go_float,
    insert_rows,
    rows_from_files,
    rows_from_request,
)

__all__ = [
    "COLUMNS",
    "EXPORTER_COMMIT",
    "LAYOUTS",
    "TRACES_DDL",
    "TRACES_JSON_DDL",
    "as_string",
    "create_table",
    "go_float",
    "insert_rows",
    "rows_from_files",
    "rows_from_request",
]
