-- name: overview_by_tool
-- Overview: final statuses by tool (one row per tool and status).
SELECT
    coalesce(tool, '(unnamed)') AS tool,
    coalesce(status, '(none)') AS status,
    count(*) AS calls,
    coalesce(sum(greatest(attempts - 1, 0)), 0) AS retries,
    coalesce(sum(total_wait_s), 0) AS scheduled_wait_s
FROM filtered_calls($t0, $t1, $conv, $tools, $statuses)
GROUP BY ALL
ORDER BY tool, status;
