-- name: finding_calls
-- Findings: the calls one finding is made of.
SELECT
    trace_id,
    span_id,
    call_id,
    tool,
    status,
    attempts,
    idempotency_key,
    replayed,
    args_fingerprint,
    read_back,
    resource_key,
    start_time,
    end_time,
    duration_ms
FROM tool_calls
WHERE list_contains($span_ids, span_id) AND list_contains($trace_ids, trace_id)
ORDER BY start_time, span_id;
