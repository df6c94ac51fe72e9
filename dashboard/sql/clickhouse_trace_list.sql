-- name: trace_list
-- Trace view (trace_list.sql on ClickHouse): one page of the traces that hold
-- filtered calls, newest first.
SELECT
    trace_id,
    any(conversation_id) AS conversation_id,
    uniqExact(request_id) AS requests,
    count() AS calls,
    countIf(status NOT IN ('succeeded', 'requested')) AS failed_calls,
    min(start_time) AS first_call
FROM ($filtered_calls)
GROUP BY trace_id
ORDER BY first_call DESC, trace_id
LIMIT {limit:UInt64} OFFSET {offset:UInt64}
