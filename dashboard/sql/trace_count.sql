-- name: trace_count
-- Trace view: how many traces the pager covers.
SELECT count(DISTINCT trace_id) AS traces
FROM filtered_calls($t0, $t1, $conv, $tools, $statuses);
