-- name: overview_services
-- Overview (overview_services.sql on ClickHouse), per downstream service and
-- time bucket: first attempts, retries, refused retries, calls failed fast and
-- calls that found the breaker open or half-open. The service is
-- toolspan.service on the call span: _toolspan_call_services (built with the
-- session, clickhouse_macros.sql) holds the calls that carry it.
-- The sidebar filters as filtered_calls applies them (clickhouse_macros.sql),
-- on the session's per-service calls.
WITH calls AS (
    SELECT *
    FROM _toolspan_call_services
    WHERE $call_filter
)
SELECT
    service,
    fromUnixTimestamp64Micro(
        intDiv(toUnixTimestamp64Micro(start_time) - 946857600000000, {bucket:Int64}) * {bucket:Int64}
            + 946857600000000,
        'UTC') AS bucket,
    countIf(attempts > 0) AS first_attempts,
    sum(greatest(coalesce(attempts, 0) - 1, 0)) AS retries,
    countIf(status = 'retry_budget') AS refused,
    countIf(status = 'circuit_open') AS failed_fast,
    countIf(circuit_state IN ('open', 'half_open')) AS saw_open
FROM calls
GROUP BY service, bucket
ORDER BY service, bucket
