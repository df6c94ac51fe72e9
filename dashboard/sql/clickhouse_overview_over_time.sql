-- name: overview_over_time
-- Overview (overview_over_time.sql on ClickHouse): calls per time bucket and
-- final status. Buckets as DuckDB's time_bucket draws them: {bucket}
-- microseconds wide, counted from its origin, 2000-01-03 00:00 UTC.
SELECT
    fromUnixTimestamp64Micro(
        intDiv(toUnixTimestamp64Micro(start_time) - 946857600000000, {bucket:Int64}) * {bucket:Int64}
            + 946857600000000,
        'UTC') AS bucket,
    status_label AS status,
    count() AS calls
FROM (SELECT start_time, coalesce(status, '(none)') AS status_label FROM ($filtered_calls))
GROUP BY bucket, status_label
ORDER BY bucket, status_label
