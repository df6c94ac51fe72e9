-- name: overview_totals
-- Overview headline figures (overview_totals.sql on ClickHouse).
SELECT
    count() AS calls,
    countIf(status = 'succeeded') AS succeeded,
    sum(coalesce(attempts, 0)) AS attempts,
    sum(greatest(coalesce(attempts, 0) - 1, 0)) AS retries,
    countIf(attempts > 1) AS retried_calls,
    sum(coalesce(total_wait_s, 0)) AS scheduled_wait_s,
    uniqExact(conversation_id) AS conversations,
    minOrNull(start_time) AS first_call,
    maxOrNull(start_time) AS last_call
FROM ($filtered_calls)
