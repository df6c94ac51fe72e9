-- name: overview_services
-- Overview (overview_services.sql on ClickHouse), per downstream service and
-- time bucket: first attempts, retries, refused retries, calls failed fast and
-- calls that found the breaker open or half-open. The service is
-- toolspan.service on the call span: _toolspan_call_services (built with the
-- session, clickhouse_macros.sql) holds the spans that carry it.
WITH calls AS (
    SELECT c.start_time AS start_time, c.attempts AS attempts, c.status AS status,
           s.service AS service, s.circuit_state AS circuit_state
    FROM ($filtered_calls) AS c
    INNER JOIN _toolspan_call_services AS s ON s.trace_id = c.trace_id AND s.span_id = c.span_id
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
