-- name: spans
CREATE OR REPLACE VIEW spans AS
SELECT trace_id, span_id, parent_span_id, name, kind, start_time, end_time, duration_ms,
       status_code, status_message, service_name, scope_name,
       map_from_entries(attribute_list) AS attributes, source_file
FROM span_rows;

-- name: trace_conversations
-- A trace's conversation, for tool spans that do not carry one themselves.
CREATE OR REPLACE VIEW trace_conversations AS
SELECT trace_id, min(conversation_id) AS conversation_id
FROM trace_conversation_rows
GROUP BY trace_id;

-- name: dominated_tool_spans
-- The same call seen by two instrumentations (e.g. Pydantic AI's execute_tool
-- span around toolspan's call span) is one logical call: keep the richer span
-- (toolspan > genai > openinference) when the two are parent and child or share
-- the tool-call id.
CREATE OR REPLACE VIEW dominated_tool_spans AS
WITH call_span AS (
    SELECT *, CASE source WHEN 'toolspan' THEN 3 WHEN 'genai' THEN 2 ELSE 1 END AS richness
    FROM tool_span_rows
    WHERE source <> 'attempt'
)
-- Three equi-joins rather than one join on an OR, which DuckDB cannot hash.
SELECT weak.trace_id, weak.span_id
FROM call_span AS weak
JOIN call_span AS strong ON strong.trace_id = weak.trace_id AND strong.parent_span_id = weak.span_id
WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
UNION
SELECT weak.trace_id, weak.span_id
FROM call_span AS weak
JOIN call_span AS strong ON strong.trace_id = weak.trace_id AND strong.span_id = weak.parent_span_id
WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
UNION
SELECT weak.trace_id, weak.span_id
FROM call_span AS weak
JOIN call_span AS strong ON strong.trace_id = weak.trace_id AND strong.call_id = weak.call_id
WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool;

-- name: tool_calls
CREATE OR REPLACE VIEW tool_calls AS
WITH attempt_count AS (
    SELECT trace_id, parent_span_id AS span_id, count(*) AS attempts
    FROM tool_span_rows
    WHERE source = 'attempt'
    GROUP BY ALL
),
call AS (
    SELECT
        c.*,
        coalesce(c.conversation_attr, tc.conversation_id, c.trace_id) AS conversation_id,
        -- Tools the user names as writes are writes, whatever their spans say:
        -- a declaration can be wrong, and that is exactly when retries hurt.
        CASE
            WHEN EXISTS (SELECT 1 FROM write_tools AS w WHERE c.tool GLOB w.pattern) THEN 'write'
            WHEN c.side_effect_attr IS NOT NULL OR c.source = 'toolspan' THEN c.side_effect_attr
            WHEN EXISTS (SELECT 1 FROM write_tools) THEN 'none'
        END AS side_effect,
        coalesce(c.status_attr, CASE WHEN c.status_code = 'ERROR' THEN 'error' ELSE 'succeeded' END) AS status,
        coalesce(c.attempts_attr, ac.attempts, CASE WHEN c.source = 'toolspan' THEN 0 ELSE 1 END) AS attempts
    FROM tool_span_rows AS c
    LEFT JOIN trace_conversations AS tc USING (trace_id)
    LEFT JOIN attempt_count AS ac ON ac.trace_id = c.trace_id AND ac.span_id = c.span_id
    WHERE c.source <> 'attempt'
      AND NOT EXISTS (
          SELECT 1 FROM dominated_tool_spans AS d
          WHERE d.trace_id = c.trace_id AND d.span_id = c.span_id)
)
SELECT
    trace_id, span_id, parent_span_id, conversation_id, request_id, turn_id, tool, call_id,
    side_effect, idempotency_key, coalesce(replayed, false) AS replayed, args_fingerprint,
    arguments,
    -- The loop answer: the result on success, the error code on failure.
    CASE
        WHEN status = 'succeeded' THEN coalesce(result_hash, result_fingerprint, 'ok')
        ELSE coalesce(error_code, status_code)
    END AS answer,
    coalesce(result_hash, result_fingerprint) AS result_hash,
    status, error_code, retryable, attempts, total_wait_s, retry_after_s, retry_initiator,
    start_time, end_time, duration_ms, source
FROM call;

-- name: attempts
CREATE OR REPLACE VIEW attempts AS
SELECT
    a.trace_id, a.span_id, a.parent_span_id AS call_span_id,
    coalesce(a.conversation_attr, tc.conversation_id, a.trace_id) AS conversation_id,
    a.tool, a.attempt, a.outcome, a.delay_s, a.elapsed_wait_s, a.error_type, a.http_status,
    a.status_code, a.start_time, a.end_time, a.duration_ms
FROM tool_span_rows AS a
LEFT JOIN trace_conversations AS tc USING (trace_id)
WHERE a.source = 'attempt';

-- name: conversations
CREATE OR REPLACE VIEW conversations AS
SELECT
    conversation_id,
    count(*) AS calls,
    sum(attempts) AS attempts,
    count(*) FILTER (WHERE status <> 'succeeded') AS failed_calls,
    min(start_time) AS first_seen,
    max(end_time) AS last_seen,
    list_sort(list(DISTINCT tool)) AS tools
FROM tool_calls
GROUP BY conversation_id;
