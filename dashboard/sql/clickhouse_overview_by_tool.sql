-- name: overview_by_tool
-- Overview (overview_by_tool.sql on ClickHouse): final statuses by tool.
SELECT
    tool_label AS tool,
    status_label AS status,
    count() AS calls,
    sum(greatest(coalesce(attempts, 0) - 1, 0)) AS retries,
    sum(coalesce(total_wait_s, 0)) AS scheduled_wait_s
FROM (
    SELECT coalesce(tool, '(unnamed)') AS tool_label, coalesce(status, '(none)') AS status_label,
        attempts, total_wait_s
    FROM ($filtered_calls)
)
GROUP BY tool_label, status_label
ORDER BY tool_label, status_label
