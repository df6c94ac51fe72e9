-- The ClickHouse forms of the filter macros (macros.sql) and of the spans view,
-- pasted as subqueries into the pages' ClickHouse queries ($filtered_calls,
-- $filtered_findings, $spans). tool_calls, attempts, conversations and
-- findings are the session's temporary tables (analyzer/_clickhouse_session.py);
-- the spans are read from the collector's table in place ($source, $range).
-- An empty array or a NULL bound means "no filter".

-- name: call_filter
-- The sidebar filters on a table of calls (tool_calls, _toolspan_call_services).
({t0:Nullable(DateTime64(6, 'UTC'))} IS NULL OR start_time >= {t0:Nullable(DateTime64(6, 'UTC'))})
  AND ({t1:Nullable(DateTime64(6, 'UTC'))} IS NULL OR start_time <= {t1:Nullable(DateTime64(6, 'UTC'))})
  AND ({conv:Nullable(String)} IS NULL OR conversation_id = {conv:Nullable(String)})
  AND (empty({tools:Array(String)}) OR has({tools:Array(String)}, tool))
  AND (empty({statuses:Array(String)}) OR has({statuses:Array(String)}, status))

-- name: filtered_calls
SELECT *
FROM tool_calls
WHERE $call_filter

-- name: filtered_findings
-- Findings overlapping the time range, in the conversation, for one of the
-- tools, and involving at least one call with one of the statuses (a call
-- whose span id is one of the finding's and trace id one of its traces).
-- No correlated subquery: a finding is known by the hash of its columns
-- (as text: NULL inside a tuple hashes as NULL, not as a NULL hash).
SELECT f.*
FROM findings AS f
WHERE ({t0:Nullable(DateTime64(6, 'UTC'))} IS NULL OR f.last_seen >= {t0:Nullable(DateTime64(6, 'UTC'))})
  AND ({t1:Nullable(DateTime64(6, 'UTC'))} IS NULL OR f.first_seen <= {t1:Nullable(DateTime64(6, 'UTC'))})
  AND ({conv:Nullable(String)} IS NULL OR f.conversation_id = {conv:Nullable(String)})
  AND (empty({tools:Array(String)}) OR has({tools:Array(String)}, f.tool))
  AND (
    empty({statuses:Array(String)})
    OR cityHash64(toString((f.kind, f.conversation_id, f.tool, f.idempotency_key, f.span_ids, f.trace_ids, f.first_seen))) IN (
      SELECT cityHash64(toString((x.kind, x.conversation_id, x.tool, x.idempotency_key, x.span_ids, x.trace_ids, x.first_seen)))
      FROM (SELECT *, arrayJoin(span_ids) AS one_span_id FROM findings) AS x
      INNER JOIN (
        SELECT trace_id AS call_trace_id, span_id AS call_span_id
        FROM tool_calls
        WHERE has({statuses:Array(String)}, status)
      ) AS c ON c.call_span_id = x.one_span_id
      WHERE has(x.trace_ids, c.call_trace_id)
    )
  )

-- name: map_attributes
-- Every attribute of a span, in the Map layout: the map itself.
mapApply((k, v) -> (k, toValidUTF8(v)), SpanAttributes)

-- name: json_attributes
-- In the JSON layout: the JSON object as text (dotted keys nest there).
toJSONString(SpanAttributes)

-- name: spans_of_trace
-- The spans of one trace ({trace_id}), read where they are: the collector's
-- bloom filter on TraceId skips the other granules.
SELECT
    TraceId AS trace_id,
    SpanId AS span_id,
    nullIf(ParentSpanId, '') AS parent_span_id,
    toValidUTF8(SpanName) AS name,
    fromUnixTimestamp64Micro(intDiv(toUnixTimestamp64Nano(Timestamp), 1000), 'UTC') AS start_time,
    fromUnixTimestamp64Micro(intDiv(toUnixTimestamp64Nano(Timestamp) + toInt64(Duration), 1000), 'UTC') AS end_time,
    toInt64(Duration) / 1e6 AS duration_ms,
    upper(StatusCode) AS status_code,
    nullIf(toValidUTF8(StatusMessage), '') AS status_message,
    -- The waterfall's model kind: SDK spans say what they are here, not in the name.
    lower(toValidUTF8(SpanAttributes['gen_ai.operation.name'])) AS operation
FROM $source
WHERE $range AND TraceId = {trace_id:String}
LIMIT 1 BY TraceId, SpanId

-- name: call_services
-- Built once into a temporary table of the session (_toolspan_call_services),
-- after tool_calls: the calls whose span carries toolspan.service, with the
-- service, the circuit state and the call's columns the filters and the
-- Overview's per-service chart read (a join on each draw took seconds on 10M
-- spans). toolspan_attr / toolspan_has read an attribute in either exporter
-- layout (Map or JSON columns; analyzer/_clickhouse.py expands them).
SELECT c.trace_id AS trace_id, c.span_id AS span_id, c.start_time AS start_time,
    c.conversation_id AS conversation_id, c.tool AS tool, c.status AS status,
    c.attempts AS attempts, s.service AS service, s.circuit_state AS circuit_state
FROM tool_calls AS c
INNER JOIN (
    SELECT TraceId AS trace_id, SpanId AS span_id,
        toolspan_attr(SpanAttributes, 'toolspan.service') AS service,
        toolspan_attr(SpanAttributes, 'toolspan.circuit.state') AS circuit_state
    FROM $source
    WHERE $range AND toolspan_has(SpanAttributes, 'toolspan.service')
    LIMIT 1 BY TraceId, SpanId
) AS s ON s.trace_id = c.trace_id AND s.span_id = c.span_id
