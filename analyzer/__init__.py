"""toolspan analyzer: DuckDB over OTLP/JSON trace files, with SQL views and
findings for agent loops and duplicate writes.

>>> from toolspan.analyzer import Analyzer
>>> with Analyzer("traces.duckdb") as az:  # doctest: +SKIP
...     az.ingest(["traces/"])
...     for finding in az.findings():
...         print(finding.kind, finding.conversation_id, finding.count)
"""

from .._errors import ToolspanError
from ._analyzer import Analyzer
from ._clickhouse import ClickHouseAnalyzer
from ._errors import AnalyzerError, CorruptInputError, DatabaseError, InputError, QueryError
from ._model import FINDING_KINDS, BadLine, Finding, IngestReport, QueryResult

__all__ = [
    "FINDING_KINDS",
    "Analyzer",
    "AnalyzerError",
    "BadLine",
    "ClickHouseAnalyzer",
    "CorruptInputError",
    "DatabaseError",
    "Finding",
    "IngestReport",
    "InputError",
    "QueryError",
    "QueryResult",
    "ToolspanError",
]
