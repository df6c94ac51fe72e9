-- name: span_attributes
-- Trace view: every attribute of one span (span_attributes.sql on ClickHouse),
-- read from the collector's table (its trace id bloom filter skips the rest);
-- the attributes expression is map_attributes or json_attributes (clickhouse_macros.sql).
SELECT $attributes AS attributes
FROM $source
WHERE $range AND TraceId = {trace_id:String} AND SpanId = {span_id:String}
LIMIT 1
