-- name: finding_calls
-- Findings: the calls one finding is made of (finding_calls.sql on ClickHouse).
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
WHERE has({span_ids:Array(String)}, span_id) AND has({trace_ids:Array(String)}, trace_id)
ORDER BY start_time, span_id
