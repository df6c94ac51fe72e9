-- name: overview_totals
-- Overview headline figures over the filtered calls, and their time span
-- (to size the over-time buckets).
SELECT
    count(*) AS calls,
    count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
    coalesce(sum(attempts), 0) AS attempts,
    coalesce(sum(greatest(attempts - 1, 0)), 0) AS retries,
    count(*) FILTER (WHERE attempts > 1) AS retried_calls,
    coalesce(sum(total_wait_s), 0) AS scheduled_wait_s,
    count(DISTINCT conversation_id) AS conversations,
    min(start_time) AS first_call,
    max(start_time) AS last_call
FROM filtered_calls($t0, $t1, $conv, $tools, $statuses);
