-- The materialised rows behind tool_calls, attempts and findings. A tool call
-- depends only on the spans of its own trace (its conversation, the spans that
-- dominate it, its attempts) and on write_tools, so an ingest recomputes the
-- traces it touched (pending_traces) and nothing else; then the findings.

-- name: side_effect_macro
-- Tools the user names as writes are writes, whatever their spans say: a
-- declaration can be wrong, and that is exactly when retries hurt.
CREATE OR REPLACE MACRO toolspan_side_effect(tool_name, declared, span_source) AS
    CASE
        WHEN EXISTS (SELECT 1 FROM write_tools AS w WHERE tool_name GLOB w.pattern) THEN 'write'
        WHEN declared IS NOT NULL OR span_source = 'toolspan' THEN declared
        WHEN EXISTS (SELECT 1 FROM write_tools) THEN 'none'
    END;

-- name: touched_traces
CREATE OR REPLACE TEMP TABLE touched_traces AS
SELECT DISTINCT trace_id FROM pending_traces;

-- name: extract_tool_spans
-- Tool spans of every instrumentation: toolspan call and attempt spans, GenAI
-- execute_tool spans, OpenInference TOOL spans, of the touched traces, with
-- the attributes the views need extracted and the arguments/results
-- fingerprinted (canonical JSON). Message-history attributes are never read:
-- they repeat earlier turns. A temporary table: the refresh reads every span
-- of a touched trace again anyway, so storing them (and deleting them for the
-- next refresh) only cost time.
CREATE OR REPLACE TEMP TABLE touched_tool_spans AS
WITH tool_span_list AS (
    SELECT *
    FROM span_rows
    LEFT JOIN attribute_key_list USING (attribute_shape)
    WHERE trace_id IN (SELECT trace_id FROM touched_traces)
      AND (
        _attribute(attribute_keys, attribute_vals, 'toolspan.attempt') IS NOT NULL
        OR _attribute(attribute_keys, attribute_vals, 'gen_ai.operation.name') = 'execute_tool'
        OR starts_with(name, 'execute_tool')
        OR _attribute(attribute_keys, attribute_vals, 'openinference.span.kind') = 'TOOL')
),
tool_span AS (
    SELECT
        *,
        coalesce(_attribute(attribute_keys, attribute_vals, 'gen_ai.tool.call.arguments'), _attribute(attribute_keys, attribute_vals, 'input.value')) AS arguments_text,
        coalesce(_attribute(attribute_keys, attribute_vals, 'gen_ai.tool.call.result'), _attribute(attribute_keys, attribute_vals, 'output.value')) AS result_text
    FROM tool_span_list
)
SELECT
    trace_id,
    span_id,
    parent_span_id,
    CASE
        WHEN _attribute(attribute_keys, attribute_vals, 'toolspan.attempt') IS NOT NULL THEN 'attempt'
        WHEN scope_name = 'toolspan' OR _attribute(attribute_keys, attribute_vals, 'toolspan.status') IS NOT NULL THEN 'toolspan'
        WHEN _attribute(attribute_keys, attribute_vals, 'openinference.span.kind') = 'TOOL' THEN 'openinference'
        ELSE 'genai'
    END AS source,
    coalesce(
        _attribute(attribute_keys, attribute_vals, 'gen_ai.tool.name'),
        _attribute(attribute_keys, attribute_vals, 'tool.name'),
        nullif(trim(regexp_replace(name, '^execute_tool', '')), '')
    ) AS tool,
    coalesce(_attribute(attribute_keys, attribute_vals, 'gen_ai.tool.call.id'), _attribute(attribute_keys, attribute_vals, 'tool_call.id')) AS call_id,
    coalesce(_attribute(attribute_keys, attribute_vals, 'gen_ai.conversation.id'), _attribute(attribute_keys, attribute_vals, 'session.id')) AS conversation_attr,
    _attribute(attribute_keys, attribute_vals, 'toolspan.request.id') AS request_id,
    _attribute(attribute_keys, attribute_vals, 'toolspan.turn.id') AS turn_id,
    _attribute(attribute_keys, attribute_vals, 'toolspan.side_effect') AS side_effect_attr,
    _attribute(attribute_keys, attribute_vals, 'toolspan.idempotency.key') AS idempotency_key,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'toolspan.idempotency.replayed') AS BOOLEAN) AS replayed,
    coalesce(_attribute(attribute_keys, attribute_vals, 'toolspan.args.hash'), sha256(toolspan_canonical_json(arguments_text))) AS args_fingerprint,
    arguments_text AS arguments,
    _attribute(attribute_keys, attribute_vals, 'toolspan.result.hash') AS result_hash,
    sha256(toolspan_canonical_json(result_text)) AS result_fingerprint,
    _attribute(attribute_keys, attribute_vals, 'toolspan.status') AS status_attr,
    coalesce(_attribute(attribute_keys, attribute_vals, 'toolspan.error_code'), _attribute(attribute_keys, attribute_vals, 'error.type')) AS error_code,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'toolspan.retryable') AS BOOLEAN) AS retryable,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'toolspan.attempts') AS BIGINT) AS attempts_attr,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'toolspan.total_wait_s') AS DOUBLE) AS total_wait_s,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'toolspan.retry_after_s') AS DOUBLE) AS retry_after_s,
    _attribute(attribute_keys, attribute_vals, 'toolspan.retry.initiator') AS retry_initiator,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'toolspan.attempt') AS BIGINT) AS attempt,
    _attribute(attribute_keys, attribute_vals, 'toolspan.attempt.outcome') AS outcome,
    _attribute(attribute_keys, attribute_vals, 'toolspan.read_back') AS read_back,
    _attribute(attribute_keys, attribute_vals, 'toolspan.resource.key') AS resource_key,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'toolspan.retry.delay_s') AS DOUBLE) AS delay_s,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'toolspan.retry.elapsed_wait_s') AS DOUBLE) AS elapsed_wait_s,
    _attribute(attribute_keys, attribute_vals, 'error.type') AS error_type,
    TRY_CAST(_attribute(attribute_keys, attribute_vals, 'http.response.status_code') AS BIGINT) AS http_status,
    status_code,
    start_time,
    end_time,
    duration_ms
FROM tool_span;

-- name: forget_touched_calls
DELETE FROM tool_call_rows WHERE trace_id IN (SELECT trace_id FROM touched_traces);

-- name: forget_touched_attempts
DELETE FROM attempt_rows WHERE trace_id IN (SELECT trace_id FROM touched_traces);

-- name: trace_conversations
-- A trace's conversation, for tool spans that do not carry one themselves:
-- from any span of the trace (the agent span often carries it).
CREATE OR REPLACE TEMP TABLE touched_conversations AS
WITH conversation_span AS (
    SELECT
        trace_id,
        coalesce(
            _attribute(attribute_keys, attribute_vals, 'gen_ai.conversation.id'),
            _attribute(attribute_keys, attribute_vals, 'session.id')) AS conversation_id
    FROM span_rows
    LEFT JOIN attribute_key_list USING (attribute_shape)
    WHERE trace_id IN (SELECT trace_id FROM touched_traces)
)
SELECT trace_id, min(conversation_id) AS conversation_id
FROM conversation_span
WHERE conversation_id IS NOT NULL
GROUP BY trace_id;

-- name: insert_tool_calls
-- Narrow CTEs only: DuckDB materialises a CTE used twice, so a wide one (with
-- the arguments text) would hold every touched tool span in memory.
INSERT INTO tool_call_rows
WITH call_key AS (
    SELECT
        trace_id, span_id, parent_span_id, call_id, tool,
        CASE source WHEN 'toolspan' THEN 3 WHEN 'genai' THEN 2 ELSE 1 END AS richness
    FROM touched_tool_spans
    WHERE source <> 'attempt' AND trace_id IN (SELECT trace_id FROM touched_traces)
),
-- The same call seen by two instrumentations (e.g. Pydantic AI's execute_tool
-- span around toolspan's call span) is one logical call: keep the richer span
-- (toolspan > genai > openinference) when the two are parent and child or share
-- the tool-call id. Three equi-joins rather than one join on an OR, which
-- DuckDB cannot hash. The richness bounds (implied by strong > weak) filter
-- each side before its hash table: with only toolspan spans no side is weak.
dominated AS (
    SELECT weak.trace_id, weak.span_id
    FROM call_key AS weak
    JOIN call_key AS strong ON strong.trace_id = weak.trace_id AND strong.parent_span_id = weak.span_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
      AND weak.richness < 3 AND strong.richness > 1
    UNION
    SELECT weak.trace_id, weak.span_id
    FROM call_key AS weak
    JOIN call_key AS strong ON strong.trace_id = weak.trace_id AND strong.span_id = weak.parent_span_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
      AND weak.richness < 3 AND strong.richness > 1
    UNION
    SELECT weak.trace_id, weak.span_id
    FROM call_key AS weak
    JOIN call_key AS strong ON strong.trace_id = weak.trace_id AND strong.call_id = weak.call_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
      AND weak.richness < 3 AND strong.richness > 1
),
attempt_count AS (
    SELECT trace_id, parent_span_id AS span_id, count(*) AS attempts
    FROM touched_tool_spans
    WHERE source = 'attempt' AND trace_id IN (SELECT trace_id FROM touched_traces)
    GROUP BY ALL
),
call AS (
    SELECT
        c.*,
        coalesce(c.conversation_attr, tc.conversation_id, c.trace_id) AS conversation_id,
        toolspan_side_effect(c.tool, c.side_effect_attr, c.source) AS side_effect,
        coalesce(c.status_attr, CASE WHEN c.status_code = 'ERROR' THEN 'error' ELSE 'succeeded' END) AS status,
        coalesce(c.attempts_attr, ac.attempts, CASE WHEN c.source = 'toolspan' THEN 0 ELSE 1 END) AS attempts
    FROM touched_tool_spans AS c
    LEFT JOIN touched_conversations AS tc USING (trace_id)
    LEFT JOIN attempt_count AS ac ON ac.trace_id = c.trace_id AND ac.span_id = c.span_id
    WHERE c.source <> 'attempt'
      AND c.trace_id IN (SELECT trace_id FROM touched_traces)
      AND NOT EXISTS (
        SELECT 1 FROM dominated AS d WHERE d.trace_id = c.trace_id AND d.span_id = c.span_id)
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
    start_time, end_time, duration_ms, source, side_effect_attr, read_back, resource_key
FROM call;

-- name: insert_attempts
INSERT INTO attempt_rows
SELECT
    a.trace_id, a.span_id, a.parent_span_id AS call_span_id,
    coalesce(a.conversation_attr, tc.conversation_id, a.trace_id) AS conversation_id,
    a.tool, a.attempt, a.outcome, a.delay_s, a.elapsed_wait_s, a.error_type, a.http_status,
    a.status_code, a.start_time, a.end_time, a.duration_ms, a.read_back
FROM touched_tool_spans AS a
LEFT JOIN touched_conversations AS tc USING (trace_id)
WHERE a.source = 'attempt' AND a.trace_id IN (SELECT trace_id FROM touched_traces);

-- name: update_side_effects
UPDATE tool_call_rows
SET side_effect = toolspan_side_effect(tool, side_effect_attr, source);

-- name: forget_findings
DELETE FROM finding_rows;

-- name: insert_findings
INSERT INTO finding_rows SELECT * FROM toolspan_findings(3);

-- name: forget_pending
DELETE FROM pending_traces;
