-- name: overview_over_time
-- Overview: calls per time bucket and final status.
SELECT
    time_bucket($bucket, start_time::TIMESTAMP) AS bucket,
    coalesce(status, '(none)') AS status,
    count(*) AS calls
FROM filtered_calls($t0, $t1, $conv, $tools, $statuses)
GROUP BY ALL
ORDER BY bucket, status;
