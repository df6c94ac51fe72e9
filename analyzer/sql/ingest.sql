-- name: suspect_files
-- Files whose spans lack a valid trace or span id: re-read line by line to
-- report the exact lines.
SELECT DISTINCT source_file
FROM stage
WHERE has_span
  AND NOT (coalesce(regexp_full_match(trace_id, '[0-9a-f]{32}'), false)
           AND coalesce(regexp_full_match(span_id, '[0-9a-f]{16}'), false));

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

-- name: insert_spans
INSERT INTO span_rows
SELECT
    trace_id, span_id, parent_span_id, name, kind,
    make_timestamp(start_ns // 1000) AS start_time,
    make_timestamp(end_ns // 1000) AS end_time,
    (end_ns - start_ns) / 1e6 AS duration_ms,
    status_code, status_message, service_name, scope_name, attributes, source_file
FROM stage AS s
WHERE has_span
  AND NOT EXISTS (SELECT 1 FROM span_rows AS r WHERE r.trace_id = s.trace_id AND r.span_id = s.span_id);

-- name: insert_conversations
INSERT INTO trace_conversation_rows
SELECT trace_id, span_id, coalesce(attributes['gen_ai.conversation.id'], attributes['session.id'])
FROM stage AS s
WHERE has_span
  AND coalesce(attributes['gen_ai.conversation.id'], attributes['session.id']) IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM trace_conversation_rows AS r WHERE r.trace_id = s.trace_id AND r.span_id = s.span_id);

-- name: insert_tool_spans
-- Tool spans of every instrumentation: toolspan call and attempt spans, GenAI
-- execute_tool spans, OpenInference TOOL spans. Message-history attributes are
-- never read: they repeat earlier turns.
INSERT INTO tool_span_rows
WITH tool_span AS (
    SELECT
        *,
        coalesce(attributes['gen_ai.tool.call.arguments'], attributes['input.value']) AS arguments_text,
        coalesce(attributes['gen_ai.tool.call.result'], attributes['output.value']) AS result_text
    FROM stage AS s
    WHERE has_span
      AND NOT EXISTS (SELECT 1 FROM tool_span_rows AS r WHERE r.trace_id = s.trace_id AND r.span_id = s.span_id)
      AND (
        attributes['toolspan.attempt'] IS NOT NULL
        OR attributes['gen_ai.operation.name'] = 'execute_tool'
        OR starts_with(name, 'execute_tool')
        OR attributes['openinference.span.kind'] = 'TOOL')
)
SELECT
    trace_id,
    span_id,
    parent_span_id,
    CASE
        WHEN attributes['toolspan.attempt'] IS NOT NULL THEN 'attempt'
        WHEN scope_name = 'toolspan' OR attributes['toolspan.status'] IS NOT NULL THEN 'toolspan'
        WHEN attributes['openinference.span.kind'] = 'TOOL' THEN 'openinference'
        ELSE 'genai'
    END AS source,
    coalesce(
        attributes['gen_ai.tool.name'],
        attributes['tool.name'],
        nullif(trim(regexp_replace(name, '^execute_tool', '')), '')
    ) AS tool,
    coalesce(attributes['gen_ai.tool.call.id'], attributes['tool_call.id']) AS call_id,
    coalesce(attributes['gen_ai.conversation.id'], attributes['session.id']) AS conversation_attr,
    attributes['toolspan.request.id'] AS request_id,
    attributes['toolspan.turn.id'] AS turn_id,
    attributes['toolspan.side_effect'] AS side_effect_attr,
    attributes['toolspan.idempotency.key'] AS idempotency_key,
    TRY_CAST(attributes['toolspan.idempotency.replayed'] AS BOOLEAN) AS replayed,
    coalesce(attributes['toolspan.args.hash'], sha256(toolspan_canonical_json(arguments_text))) AS args_fingerprint,
    arguments_text AS arguments,
    attributes['toolspan.result.hash'] AS result_hash,
    sha256(toolspan_canonical_json(result_text)) AS result_fingerprint,
    attributes['toolspan.status'] AS status_attr,
    coalesce(attributes['toolspan.error_code'], attributes['error.type']) AS error_code,
    TRY_CAST(attributes['toolspan.retryable'] AS BOOLEAN) AS retryable,
    TRY_CAST(attributes['toolspan.attempts'] AS BIGINT) AS attempts_attr,
    TRY_CAST(attributes['toolspan.total_wait_s'] AS DOUBLE) AS total_wait_s,
    TRY_CAST(attributes['toolspan.retry_after_s'] AS DOUBLE) AS retry_after_s,
    attributes['toolspan.retry.initiator'] AS retry_initiator,
    TRY_CAST(attributes['toolspan.attempt'] AS BIGINT) AS attempt,
    attributes['toolspan.attempt.outcome'] AS outcome,
    TRY_CAST(attributes['toolspan.retry.delay_s'] AS DOUBLE) AS delay_s,
    TRY_CAST(attributes['toolspan.retry.elapsed_wait_s'] AS DOUBLE) AS elapsed_wait_s,
    attributes['error.type'] AS error_type,
    TRY_CAST(attributes['http.response.status_code'] AS BIGINT) AS http_status,
    status_code,
    make_timestamp(start_ns // 1000) AS start_time,
    make_timestamp(end_ns // 1000) AS end_time,
    (end_ns - start_ns) / 1e6 AS duration_ms
FROM tool_span;
