-- name: timeline_calls
-- Retry timelines: one page of logical calls, most attempts first. A call is its
-- span (trace_id, span_id): call ids repeat across conversations.
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
FROM filtered_calls($t0, $t1, $conv, $tools, $statuses)
WHERE NOT $problem_only OR attempts > 1 OR status <> 'succeeded'
ORDER BY attempts DESC, start_time, trace_id, span_id
LIMIT $limit OFFSET $offset;
