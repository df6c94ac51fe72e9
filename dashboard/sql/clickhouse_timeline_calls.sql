-- name: timeline_calls
-- Retry timelines (timeline_calls.sql on ClickHouse): one page of logical
-- calls, most attempts first.
SELECT
    trace_id,
    span_id,
    call_id,
    conversation_id,
    tool,
    status,
    error_code,
    attempts,
    replayed,
    total_wait_s,
    retry_after_s,
    start_time
FROM ($filtered_calls)
WHERE NOT {problem_only:Bool} OR attempts > 1 OR status <> 'succeeded'
ORDER BY attempts DESC NULLS LAST, start_time, trace_id, span_id
LIMIT {limit:UInt64} OFFSET {offset:UInt64}
