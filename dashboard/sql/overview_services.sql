-- name: overview_services
-- Overview, per downstream service and time bucket: first attempts and retries
-- made, retries the budget refused (status retry_budget), calls the circuit
-- breaker failed fast (circuit_open), and calls that found the breaker open or
-- half-open (its open periods). The service is toolspan.service on the call
-- span: only calls of an executor with a retry budget or a circuit breaker
-- carry it.
WITH calls AS (
    SELECT c.start_time, c.attempts, c.status,
           s.attributes['toolspan.service'] AS service,
           s.attributes['toolspan.circuit.state'] AS circuit_state
    FROM filtered_calls($t0, $t1, $conv, $tools, $statuses) AS c
    JOIN spans AS s ON s.trace_id = c.trace_id AND s.span_id = c.span_id
)
SELECT
    service,
    time_bucket($bucket, start_time::TIMESTAMP) AS bucket,
    count(*) FILTER (WHERE attempts > 0) AS first_attempts,
    coalesce(sum(greatest(attempts - 1, 0)), 0) AS retries,
    count(*) FILTER (WHERE status = 'retry_budget') AS refused,
    count(*) FILTER (WHERE status = 'circuit_open') AS failed_fast,
    count(*) FILTER (WHERE circuit_state IN ('open', 'half_open')) AS saw_open
FROM calls
WHERE service IS NOT NULL
GROUP BY ALL
ORDER BY service, bucket
