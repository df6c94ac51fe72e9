-- name: suspect_files
-- Files whose spans lack a valid trace or span id, or have an attribute without
-- a key or the same key twice: re-read line by line to report the exact lines.
SELECT DISTINCT source_file
FROM stage
WHERE has_span
  AND NOT (coalesce(regexp_full_match(trace_id, '[0-9a-f]{32}'), false)
           AND coalesce(regexp_full_match(span_id, '[0-9a-f]{16}'), false)
           AND attribute_keys_ok);

-- name: file_counts
SELECT source_file, count(*) FILTER (WHERE first_of_line) AS lines, count(*) FILTER (WHERE has_span) AS spans
FROM stage
GROUP BY source_file;

-- name: duplicate_spans
-- Spans present twice in the batch (e.g. a file and its .gz copy).
SELECT count(*) - count(DISTINCT (trace_id, span_id)) FROM stage WHERE has_span;

-- name: deduplicate_stage
CREATE OR REPLACE TEMP TABLE stage AS
SELECT * FROM stage
WHERE has_span
QUALIFY row_number() OVER (PARTITION BY trace_id, span_id ORDER BY source_file) = 1;

-- name: remember_pending_traces
-- The batch's traces: their tool calls are recomputed after the batch commits
-- (derive.sql). Recomputing inside the batch's transaction costs far more.
INSERT INTO pending_traces
SELECT DISTINCT trace_id FROM stage WHERE has_span;

-- name: insert_spans
INSERT INTO span_rows
SELECT
    trace_id, span_id, parent_span_id, name, kind,
    make_timestamp(start_ns // 1000) AS start_time,
    make_timestamp(end_ns // 1000) AS end_time,
    (end_ns - start_ns) / 1e6 AS duration_ms,
    status_code, status_message, service_name, scope_name, attribute_kv, source_file
FROM stage AS s
WHERE has_span
  AND NOT EXISTS (SELECT 1 FROM span_rows AS r WHERE r.trace_id = s.trace_id AND r.span_id = s.span_id);

-- name: insert_conversations
INSERT INTO trace_conversation_rows
WITH conversation_span AS (
    SELECT
        trace_id, span_id,
        coalesce(
            _attribute(attribute_kv, 'gen_ai.conversation.id'),
            _attribute(attribute_kv, 'session.id')) AS conversation_id
    FROM stage
    WHERE has_span
)
SELECT trace_id, span_id, conversation_id
FROM conversation_span AS s
WHERE conversation_id IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM trace_conversation_rows AS r WHERE r.trace_id = s.trace_id AND r.span_id = s.span_id);

-- name: insert_tool_spans
-- Tool spans of every instrumentation: toolspan call and attempt spans, GenAI
-- execute_tool spans, OpenInference TOOL spans. Message-history attributes are
-- never read: they repeat earlier turns.
INSERT INTO tool_span_rows
WITH tool_span_list AS (
    SELECT *
    FROM stage AS s
    WHERE has_span
      AND NOT EXISTS (SELECT 1 FROM tool_span_rows AS r WHERE r.trace_id = s.trace_id AND r.span_id = s.span_id)
      AND (
        _attribute(attribute_kv, 'toolspan.attempt') IS NOT NULL
        OR _attribute(attribute_kv, 'gen_ai.operation.name') = 'execute_tool'
        OR starts_with(name, 'execute_tool')
        OR _attribute(attribute_kv, 'openinference.span.kind') = 'TOOL')
),
tool_span AS (
    SELECT
        *,
        coalesce(_attribute(attribute_kv, 'gen_ai.tool.call.arguments'), _attribute(attribute_kv, 'input.value')) AS arguments_text,
        coalesce(_attribute(attribute_kv, 'gen_ai.tool.call.result'), _attribute(attribute_kv, 'output.value')) AS result_text
    FROM tool_span_list
)
SELECT
    trace_id,
    span_id,
    parent_span_id,
    CASE
        WHEN _attribute(attribute_kv, 'toolspan.attempt') IS NOT NULL THEN 'attempt'
        WHEN scope_name = 'toolspan' OR _attribute(attribute_kv, 'toolspan.status') IS NOT NULL THEN 'toolspan'
        WHEN _attribute(attribute_kv, 'openinference.span.kind') = 'TOOL' THEN 'openinference'
        ELSE 'genai'
    END AS source,
    coalesce(
        _attribute(attribute_kv, 'gen_ai.tool.name'),
        _attribute(attribute_kv, 'tool.name'),
        nullif(trim(regexp_replace(name, '^execute_tool', '')), '')
    ) AS tool,
    coalesce(_attribute(attribute_kv, 'gen_ai.tool.call.id'), _attribute(attribute_kv, 'tool_call.id')) AS call_id,
    coalesce(_attribute(attribute_kv, 'gen_ai.conversation.id'), _attribute(attribute_kv, 'session.id')) AS conversation_attr,
    _attribute(attribute_kv, 'toolspan.request.id') AS request_id,
    _attribute(attribute_kv, 'toolspan.turn.id') AS turn_id,
    _attribute(attribute_kv, 'toolspan.side_effect') AS side_effect_attr,
    _attribute(attribute_kv, 'toolspan.idempotency.key') AS idempotency_key,
    TRY_CAST(_attribute(attribute_kv, 'toolspan.idempotency.replayed') AS BOOLEAN) AS replayed,
    coalesce(_attribute(attribute_kv, 'toolspan.args.hash'), sha256(toolspan_canonical_json(arguments_text))) AS args_fingerprint,
    arguments_text AS arguments,
    _attribute(attribute_kv, 'toolspan.result.hash') AS result_hash,
    sha256(toolspan_canonical_json(result_text)) AS result_fingerprint,
    _attribute(attribute_kv, 'toolspan.status') AS status_attr,
    coalesce(_attribute(attribute_kv, 'toolspan.error_code'), _attribute(attribute_kv, 'error.type')) AS error_code,
    TRY_CAST(_attribute(attribute_kv, 'toolspan.retryable') AS BOOLEAN) AS retryable,
    TRY_CAST(_attribute(attribute_kv, 'toolspan.attempts') AS BIGINT) AS attempts_attr,
    TRY_CAST(_attribute(attribute_kv, 'toolspan.total_wait_s') AS DOUBLE) AS total_wait_s,
    TRY_CAST(_attribute(attribute_kv, 'toolspan.retry_after_s') AS DOUBLE) AS retry_after_s,
    _attribute(attribute_kv, 'toolspan.retry.initiator') AS retry_initiator,
    TRY_CAST(_attribute(attribute_kv, 'toolspan.attempt') AS BIGINT) AS attempt,
    _attribute(attribute_kv, 'toolspan.attempt.outcome') AS outcome,
    _attribute(attribute_kv, 'toolspan.read_back') AS read_back,
    TRY_CAST(_attribute(attribute_kv, 'toolspan.retry.delay_s') AS DOUBLE) AS delay_s,
    TRY_CAST(_attribute(attribute_kv, 'toolspan.retry.elapsed_wait_s') AS DOUBLE) AS elapsed_wait_s,
    _attribute(attribute_kv, 'error.type') AS error_type,
    TRY_CAST(_attribute(attribute_kv, 'http.response.status_code') AS BIGINT) AS http_status,
    status_code,
    make_timestamp(start_ns // 1000) AS start_time,
    make_timestamp(end_ns // 1000) AS end_time,
    (end_ns - start_ns) / 1e6 AS duration_ms
FROM tool_span;
