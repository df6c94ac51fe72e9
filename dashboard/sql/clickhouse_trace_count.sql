-- name: trace_count
-- Trace view: how many traces the pager covers (trace_count.sql on ClickHouse).
SELECT uniqExact(trace_id) AS traces
FROM ($filtered_calls)
