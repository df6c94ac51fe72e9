-- name: timeline_attempts
-- Retry timelines (timeline_attempts.sql on ClickHouse): the attempts of the
-- calls on the page, in milliseconds from their call's start.
SELECT
    a.trace_id AS trace_id,
    a.call_span_id AS call_span_id,
    a.attempt AS attempt,
    coalesce(a.outcome, '(unknown)') AS outcome,
    coalesce(a.delay_s, 0) AS delay_s,
    a.duration_ms AS duration_ms,
    (toUnixTimestamp64Micro(a.start_time) - toUnixTimestamp64Micro(c.start_time)) / 1000.0 AS start_ms,
    (toUnixTimestamp64Micro(a.end_time) - toUnixTimestamp64Micro(c.start_time)) / 1000.0 AS end_ms,
    (toUnixTimestamp64Micro(a.end_time) - toUnixTimestamp64Micro(c.start_time)) / 1000.0
        + coalesce(a.delay_s, 0) * 1000.0 AS wait_end_ms
-- Both sides narrowed to the page's calls before the join (ClickHouse builds
-- the right side of a join whole), by IN sets (hashed once) rather than has()
-- over the array on every row.
FROM (
    SELECT * FROM attempts
    WHERE call_span_id IN (SELECT arrayJoin({span_ids:Array(String)}))
      AND trace_id IN (SELECT arrayJoin({trace_ids:Array(String)}))
) AS a
INNER JOIN (
    SELECT trace_id, span_id, start_time FROM tool_calls
    WHERE span_id IN (SELECT arrayJoin({span_ids:Array(String)}))
      AND trace_id IN (SELECT arrayJoin({trace_ids:Array(String)}))
) AS c ON c.trace_id = a.trace_id AND c.span_id = a.call_span_id
ORDER BY a.trace_id, a.call_span_id, a.attempt
