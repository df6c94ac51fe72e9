-- name: spans
CREATE OR REPLACE VIEW spans AS
SELECT trace_id, span_id, parent_span_id, name, kind, start_time, end_time, duration_ms,
       status_code, status_message, service_name, scope_name,
       map(attribute_keys, attribute_vals) AS attributes, source_file
FROM span_rows
LEFT JOIN attribute_key_list USING (attribute_shape);

-- name: tool_calls
-- Materialised at ingest (derive.sql): reading it is a scan.
CREATE OR REPLACE VIEW tool_calls AS
SELECT
    trace_id, span_id, parent_span_id, conversation_id, request_id, turn_id, tool, call_id,
    side_effect, idempotency_key, replayed, args_fingerprint, arguments, answer, result_hash,
    status, error_code, retryable, attempts, total_wait_s, retry_after_s, retry_initiator,
    start_time, end_time, duration_ms, source, read_back, resource_key, keys_honoured
FROM tool_call_rows;

-- name: attempts
CREATE OR REPLACE VIEW attempts AS
SELECT
    trace_id, span_id, call_span_id, conversation_id, tool, attempt, outcome, delay_s,
    elapsed_wait_s, error_type, http_status, status_code, start_time, end_time, duration_ms
FROM attempt_rows;

-- name: conversations
CREATE OR REPLACE VIEW conversations AS
SELECT
    conversation_id,
    count(*) AS calls,
    sum(attempts) AS attempts,
    -- A requested call did not fail: nothing is known of how it ran.
    count(*) FILTER (WHERE status NOT IN ('succeeded', 'requested')) AS failed_calls,
    min(start_time) AS first_seen,
    max(end_time) AS last_seen,
    list_sort(list(DISTINCT tool)) AS tools
FROM tool_calls
GROUP BY conversation_id;
