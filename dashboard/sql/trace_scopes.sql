-- name: trace_scopes
-- Trace view: the requests and turns of one trace, to narrow the waterfall.
SELECT 'request' AS scope, request_id AS scope_id, count(*) AS calls, min(start_time) AS first_call
FROM tool_calls
WHERE trace_id = $trace_id AND request_id IS NOT NULL
GROUP BY ALL
UNION ALL
SELECT 'turn', turn_id, count(*), min(start_time)
FROM tool_calls
WHERE trace_id = $trace_id AND turn_id IS NOT NULL
GROUP BY ALL
ORDER BY first_call, scope, scope_id;
