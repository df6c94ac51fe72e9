-- name: trace_scopes
-- Trace view (trace_scopes.sql on ClickHouse): the requests and turns of one trace.
SELECT scope, scope_id, calls, first_call
FROM (
    SELECT 'request' AS scope, request_id AS scope_id, count() AS calls, min(start_time) AS first_call
    FROM tool_calls
    WHERE trace_id = {trace_id:String} AND request_id IS NOT NULL
    GROUP BY request_id
    UNION ALL
    SELECT 'turn' AS scope, turn_id AS scope_id, count() AS calls, min(start_time) AS first_call
    FROM tool_calls
    WHERE trace_id = {trace_id:String} AND turn_id IS NOT NULL
    GROUP BY turn_id
)
ORDER BY first_call, scope, scope_id
