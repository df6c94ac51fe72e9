-- name: timeline_attempts
-- Retry timelines: the attempts of the calls on the current page, in
-- milliseconds from their call's start. A bar spans the attempt's own time
-- plus the delay scheduled after it.
SELECT
    a.trace_id,
    a.call_span_id,
    a.attempt,
    coalesce(a.outcome, '(unknown)') AS outcome,
    coalesce(a.delay_s, 0) AS delay_s,
    a.duration_ms,
    date_diff('microsecond', c.start_time, a.start_time) / 1000.0 AS start_ms,
    date_diff('microsecond', c.start_time, a.end_time) / 1000.0 AS end_ms,
    date_diff('microsecond', c.start_time, a.end_time) / 1000.0
        + coalesce(a.delay_s, 0) * 1000.0 AS wait_end_ms
FROM attempts AS a
JOIN tool_calls AS c ON c.trace_id = a.trace_id AND c.span_id = a.call_span_id
WHERE list_contains($span_ids, a.call_span_id)
  AND list_contains($trace_ids, a.trace_id)
ORDER BY a.trace_id, a.call_span_id, a.attempt;
