"""What the OpenTelemetry Collector's ClickHouse exporter writes: its
``otel_traces`` DDL and its value mapping, applied to OTLP/JSON requests.
``toolspan serve --clickhouse`` writes the spans it receives this way (so that
every reader of the exporter's table reads them: this analyzer, the dashboard,
HyperDX, Grafana), and the tests and benchmarks load traces with it.

The DDL is copied from opentelemetry-collector-contrib
``exporter/clickhouseexporter/internal/sql_templates/traces_table.sql`` at
commit ff7a94656bd04ce95228ff4282554a233ed93434 (the ``%s`` placeholders filled
with the table name, no ``ON CLUSTER``, engine ``MergeTree()``, no TTL). The
row mapping follows ``exporter_traces.go`` (one row per span; ``ServiceName``
from the resource's ``service.name``; ``ScopeName``/``ScopeVersion`` columns;
``Duration`` = end - start in ns; ``SpanKind`` and ``StatusCode`` as pdata's
``String()``: ``Internal``, ``Server``, ... and ``Unset``, ``Ok``, ``Error``;
ids lowercase hex) and every attribute value through pdata's
``Value.AsString`` (ints as decimal text, booleans ``true``/``false``, doubles
in Go's ES6 shortest form, so ``2.0`` is ``2``; bytes base64; arrays and maps
as JSON with sorted keys).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

EXPORTER_COMMIT = "ff7a94656bd04ce95228ff4282554a233ed93434"

TRACES_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
SETTINGS index_granularity=8192, ttl_only_drop_parts = 1
"""

# The JSON layout (the exporter's ``json: true`` option): the same columns, the
# attribute columns typed JSON (values keep their OTLP type). Copied from
# ``exporter/clickhouseexporter/internal/sqltemplates/traces_json_table.sql`` at
# commit 39f94831a58596011d18c28e6532fe5f31d03472 (placeholders filled as above;
# later versions add ResourceAttributesKeys/SpanAttributesKeys arrays, which the
# analyzer does not read). Rows follow ``exporter_traces_json.go``: each
# attribute map is ``json.Marshal(attributes.AsRaw())``, parsed by ClickHouse.
TRACES_JSON_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes JSON CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes JSON CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes JSON
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes JSON
    ) CODEC(ZSTD(1)),
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
) ENGINE = MergeTree()
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
SETTINGS index_granularity=8192, ttl_only_drop_parts = 1
"""
LAYOUTS = ("map", "json")
# COLUMNS with the attribute maps as text (the JSON layout's staging table).
_STAGING_COLUMNS = (
    "Timestamp DateTime64(9), TraceId String, SpanId String, ParentSpanId String,"
    " TraceState String, SpanName String, SpanKind String, ServiceName String,"
    " ResourceAttributes String, ScopeName String, ScopeVersion String,"
    " SpanAttributes String, Duration UInt64, StatusCode String, StatusMessage String,"
    " `Events.Timestamp` Array(DateTime64(9)), `Events.Name` Array(String),"
    " `Events.Attributes` Array(String)"
)
_DDL = {"map": TRACES_DDL, "json": TRACES_JSON_DDL}

COLUMNS = (
    "Timestamp",
    "TraceId",
    "SpanId",
    "ParentSpanId",
    "TraceState",
    "SpanName",
    "SpanKind",
    "ServiceName",
    "ResourceAttributes",
    "ScopeName",
    "ScopeVersion",
    "SpanAttributes",
    "Duration",
    "StatusCode",
    "StatusMessage",
    # The span's events, as the exporter's Nested Events column: the analyzer
    # reads the exception events' exception.type (a failure's type).
    "Events.Timestamp",
    "Events.Name",
    "Events.Attributes",
)

# ptrace.SpanKind.String() and ptrace.StatusCode.String().
_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
_STATUSES = ("Unset", "Ok", "Error")


def go_float(value: float) -> str:
    """pdata's ``float64AsString``: ES6 number-to-string, the shortest digits
    that round-trip (as Python's repr), positional ('f') except below 1e-6 and
    from 1e21 on, where it is ``1e-7`` / ``1e+21`` style."""
    if math.isinf(value) or math.isnan(value):
        return f"json: unsupported value: {value}"
    shortest = repr(value)
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        mantissa, exponent = shortest.split("e")
        return f"{mantissa}e{int(exponent):+d}"
    text = _expand(shortest) if "e" in shortest else shortest
    return text.removesuffix(".0")


def _expand(shortest: str) -> str:
    """Positional form of a repr() with an exponent (``1e+16`` -> ``10000000000000000``)."""
    mantissa, exponent = shortest.split("e")
    sign = "-" if mantissa.startswith("-") else ""
    whole, _, frac = mantissa.lstrip("-").partition(".")
    digits, point = whole + frac, len(whole) + int(exponent)
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _raw(value: dict[str, Any]) -> Any:
    """An OTLP/JSON AnyValue as pdata's ``AsRaw`` (for arrays and maps)."""
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "bytesValue" in value:
        return value["bytesValue"]  # already base64 in OTLP/JSON, as json.Marshal writes []byte
    if "arrayValue" in value:
        return [_raw(v) for v in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return {
            kv["key"]: _raw(kv.get("value", {})) for kv in value["kvlistValue"].get("values", [])
        }
    return None


def _go_json(value: Any) -> str:
    """Go's json.Marshal without HTML escaping: sorted map keys, ES6 floats."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, int | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    items = sorted(value.items())
    return (
        "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_go_json(v)}" for k, v in items) + "}"
    )


def as_string(value: dict[str, Any]) -> str:
    """pdata ``Value.AsString`` of an OTLP/JSON AnyValue."""
    if "stringValue" in value:
        return str(value["stringValue"])
    if "boolValue" in value:
        return "true" if value["boolValue"] else "false"
    if "intValue" in value:
        return str(int(value["intValue"]))
    if "doubleValue" in value:
        return go_float(float(value["doubleValue"]))
    if "bytesValue" in value:
        return base64.b64encode(base64.b64decode(value["bytesValue"])).decode()
    if "arrayValue" in value or "kvlistValue" in value:
        return _go_json(_raw(value))
    return ""


def _attributes(items: Iterable[dict[str, Any]], layout: str = "map") -> Any:
    """The Map layout's text values, or the JSON layout's JSON text."""
    if layout == "json":
        return _go_json({kv["key"]: _raw(kv.get("value", {})) for kv in items})
    out = {}
    for kv in items:
        value = kv.get("value", {})
        # Most values are strings: as_string's answer without its call.
        text = value.get("stringValue")
        out[kv["key"]] = text if type(text) is str else as_string(value)
    return out


def _enum(value: Any, names: Sequence[str], prefix: str) -> str:
    if isinstance(value, int):
        return names[value] if 0 <= value < len(names) else names[0]
    text = str(value or "").upper().removeprefix(prefix)
    by_upper = {n.upper(): n for n in names}
    return by_upper.get(text, names[0])


def rows_from_request(request: dict[str, Any], layout: str = "map") -> Iterator[list[Any]]:
    """The otel_traces rows of one ExportTraceServiceRequest (OTLP/JSON)."""
    for resource_spans in request.get("resourceSpans") or []:
        items = (resource_spans.get("resource") or {}).get("attributes") or []
        resource = _attributes(items, layout)
        service = (resource if layout == "map" else _attributes(items)).get("service.name", "")
        for scope_spans in resource_spans.get("scopeSpans") or []:
            scope = scope_spans.get("scope") or {}
            for span in scope_spans.get("spans") or []:
                start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
                status = span.get("status") or {}
                yield [
                    _timestamp(start),
                    span["traceId"].lower(),
                    span["spanId"].lower(),
                    (span.get("parentSpanId") or "").lower(),
                    span.get("traceState") or "",
                    span.get("name") or "",
                    _enum(span.get("kind", 0), _KINDS, "SPAN_KIND_"),
                    service,
                    resource,
                    scope.get("name") or "",
                    scope.get("version") or "",
                    _attributes(span.get("attributes") or [], layout),
                    end - start,
                    _enum(status.get("code", 0), _STATUSES, "STATUS_CODE_"),
                    status.get("message") or "",
                    *_events(span.get("events") or [], layout),
                ]


def _events(events: list[Any], layout: str) -> list[list[Any]]:
    """The Nested Events column's three arrays (timestamps, names, attributes)."""
    events = [e for e in events if isinstance(e, dict)]
    return [
        [_timestamp(int(e.get("timeUnixNano") or 0)) for e in events],
        [str(e.get("name") or "") for e in events],
        [_attributes(e.get("attributes") or [], layout) for e in events],
    ]


def _timestamp(ns: int) -> int:
    # DateTime64(9) ticks: clickhouse-connect inserts an int as is, to the nanosecond.
    return ns


def _text(path: Path) -> str:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.name.endswith(".zst"):
        import zstandard

        data = zstandard.ZstdDecompressor().stream_reader(data).read()
    return data.decode("utf-8")


def rows_from_files(paths: Iterable[Path], layout: str = "map") -> list[list[Any]]:
    """Every span of OTLP/JSON lines files as otel_traces rows."""
    rows: list[list[Any]] = []
    for path in paths:
        for line in _text(path).splitlines():
            if line.strip():
                rows.extend(rows_from_request(json.loads(line), layout))
    return rows


def create_table(client: Any, table: str = "otel_traces", layout: str = "map") -> None:
    client.command(_DDL[layout].format(table=table))


def insert_rows(
    client: Any, rows: Sequence[Sequence[Any]], table: str = "otel_traces", layout: str = "map"
) -> None:
    """Insert rows of :func:`rows_from_files` (of the same layout). JSON-layout
    rows carry the attributes as JSON text, which ClickHouse parses into the
    JSON columns as it does the exporter's: through a String staging table."""
    if not rows:
        return
    if layout == "map":
        client.insert(table, rows, column_names=COLUMNS)
        return
    staging = f"{table}_staging"
    client.command(f"DROP TABLE IF EXISTS {staging}")
    client.command(f"CREATE TABLE {staging} ({_STAGING_COLUMNS}) ENGINE = Memory")
    try:
        client.insert(staging, rows, column_names=COLUMNS)
        client.command(
            f"INSERT INTO {table} ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} FROM {staging}"
        )
    finally:
        client.command(f"DROP TABLE IF EXISTS {staging}")


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
