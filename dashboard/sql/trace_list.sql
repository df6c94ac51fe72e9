-- name: trace_list
-- Trace view: one page of the traces that hold filtered calls, newest first.
SELECT
    trace_id,
    any_value(conversation_id) AS conversation_id,
    count(DISTINCT request_id) AS requests,
    count(*) AS calls,
    count(*) FILTER (WHERE status NOT IN ('succeeded', 'requested')) AS failed_calls,
    min(start_time) AS first_call
FROM filtered_calls($t0, $t1, $conv, $tools, $statuses)
GROUP BY trace_id
ORDER BY first_call DESC, trace_id
LIMIT $limit OFFSET $offset;
