-- ClickHouse: the tool spans, tool calls and attempts of the OpenTelemetry
-- Collector's otel_traces table (clickhouseexporter), with the same rules as
-- the DuckDB path (derive.sql). toolspan_attr(SpanAttributes, 'key') is the
-- attribute as text, NULL when absent (as in DuckDB), and
-- toolspan_has(SpanAttributes, 'key') whether it is there: analyzer/_clickhouse.py
-- expands both for the table's layout (a Map of text, or a JSON column of
-- typed values). Placeholders filled by analyzer/_clickhouse.py: $source (the
-- collector's table), $range (the time filter), $write_tools (an
-- Array(String) of regular expressions), and toolspan_canonical_json(column),
-- expanded to canonical-JSON SQL (sorted keys, no whitespace).
-- Run with join_use_nulls = 1: a row without a match reads NULL, as in DuckDB.

-- name: tool_spans
-- Ids are the exporter's lowercase hex, compared as written.
-- Tool spans of every instrumentation (toolspan call and attempt spans, GenAI
-- execute_tool spans, OpenInference TOOL spans), once per trace and span id
-- however often the collector delivered them. Only these rows are read on.
SELECT
    trace_id,
    span_id,
    parent_span_id,
    multiIf(
        a_attempt IS NOT NULL, 'attempt',
        scope_name = 'toolspan' OR a_status IS NOT NULL, 'toolspan',
        a_oi_kind = 'TOOL', 'openinference',
        name = 'ai.toolCall', 'vercel',
        'genai') AS source,
    -- The result ToolMessage's name before the span's (derive.sql: OpenLLMetry JS).
    coalesce(a_tool_name, a_oi_tool_name, a_vercel_tool_name, nullIf(JSONExtractString(result_message, 'name'), ''),
             nullIf(trimBoth(replaceRegexpOne(name, '^execute_tool', '')), '')) AS tool,
    coalesce(a_call_id, a_oi_call_id, a_vercel_call_id) AS call_id,
    coalesce(a_conversation, a_session, a_vercel_session) AS conversation_attr,
    a_request_id AS request_id,
    a_turn_id AS turn_id,
    a_side_effect AS side_effect_attr,
    a_key AS idempotency_key,
    accurateCastOrNull(a_replayed, 'Bool') AS replayed,
    if(a_args_hash IS NOT NULL, a_args_hash, fingerprints[1]) AS args_fingerprint,
    arguments_text AS arguments,
    a_result_hash AS result_hash,
    fingerprints[2] AS result_fingerprint,
    a_status AS status_attr,
    -- Failures as derive.sql reads them: toolspan's code, error.type, else the
    -- exception event's type or a LangChain ToolMessage with status "error".
    coalesce(
        a_error_code, a_error_type,
        if(a_status IS NULL AND scope_name <> 'toolspan',
           coalesce(exception_class, if(result_failed, 'tool_error', NULL)), NULL)) AS error_code,
    accurateCastOrNull(a_retryable, 'Bool') AS retryable,
    toInt64OrNull(a_attempts) AS attempts_attr,
    toFloat64OrNull(a_total_wait_s) AS total_wait_s,
    toFloat64OrNull(a_retry_after_s) AS retry_after_s,
    a_initiator AS retry_initiator,
    toInt64OrNull(a_attempt) AS attempt,
    a_outcome AS outcome,
    a_read_back AS read_back,
    a_resource_key AS resource_key,
    a_keys_honoured AS keys_honoured,
    toFloat64OrNull(a_delay_s) AS delay_s,
    toFloat64OrNull(a_elapsed_wait_s) AS elapsed_wait_s,
    a_error_type AS error_type,
    toInt64OrNull(a_http_status) AS http_status,
    status_code,
    -- Microseconds, truncated, as the DuckDB path stores them.
    fromUnixTimestamp64Micro(intDiv(start_ns, 1000), 'UTC') AS start_time,
    fromUnixTimestamp64Micro(intDiv(start_ns + duration_ns, 1000), 'UTC') AS end_time,
    duration_ns / 1e6 AS duration_ms
FROM (
    SELECT
        TraceId AS trace_id,
        SpanId AS span_id,
        nullIf(ParentSpanId, '') AS parent_span_id,
        toValidUTF8(SpanName) AS name,
        ScopeName AS scope_name,
        upper(StatusCode) AS status_code,
        toUnixTimestamp64Nano(Timestamp) AS start_ns,
        toInt64(Duration) AS duration_ns,
        -- Text that leaves ClickHouse must be valid UTF-8 (a driver would turn it
        -- into hex): invalid sequences become U+FFFD, as a JSON decoder does.
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.attempt')) AS a_attempt,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.status')) AS a_status,
        toValidUTF8(toolspan_attr(SpanAttributes, 'openinference.span.kind')) AS a_oi_kind,
        toValidUTF8(toolspan_attr(SpanAttributes, 'gen_ai.tool.name')) AS a_tool_name,
        toValidUTF8(toolspan_attr(SpanAttributes, 'tool.name')) AS a_oi_tool_name,
        toValidUTF8(toolspan_attr(SpanAttributes, 'gen_ai.tool.call.id')) AS a_call_id,
        toValidUTF8(toolspan_attr(SpanAttributes, 'tool_call.id')) AS a_oi_call_id,
        toValidUTF8(toolspan_attr(SpanAttributes, 'ai.toolCall.name')) AS a_vercel_tool_name,
        toValidUTF8(toolspan_attr(SpanAttributes, 'ai.toolCall.id')) AS a_vercel_call_id,
        toValidUTF8(toolspan_attr(SpanAttributes, 'ai.telemetry.metadata.sessionId')) AS a_vercel_session,
        toValidUTF8(toolspan_attr(SpanAttributes, 'gen_ai.conversation.id')) AS a_conversation,
        toValidUTF8(toolspan_attr(SpanAttributes, 'session.id')) AS a_session,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.request.id')) AS a_request_id,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.turn.id')) AS a_turn_id,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.side_effect')) AS a_side_effect,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.idempotency.key')) AS a_key,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.idempotency.replayed')) AS a_replayed,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.args.hash')) AS a_args_hash,
        -- NULL when not recorded: empty, or OpenInference's placeholder with
        -- content capture off (derive.sql, toolspan_recorded).
        if(trimBoth(ifNull(arguments_raw, '')) IN ('', '__REDACTED__'), NULL, arguments_raw) AS arguments_text,
        if(trimBoth(ifNull(result_raw, '')) IN ('', '__REDACTED__'), NULL, result_raw) AS result_text,
        coalesce(
            toValidUTF8(toolspan_attr(SpanAttributes, 'gen_ai.tool.call.arguments')),
            toValidUTF8(toolspan_attr(SpanAttributes, 'input.value')),
            toValidUTF8(toolspan_attr(SpanAttributes, 'ai.toolCall.args')),
            -- OpenLLMetry JS: {"args": ["<the tool's input>"]} (derive.sql).
            if(JSONType(a_traceloop_input, 'args', 1) = 'String',
               JSONExtractString(a_traceloop_input, 'args', 1), NULL)) AS arguments_raw,
        coalesce(
            toValidUTF8(toolspan_attr(SpanAttributes, 'gen_ai.tool.call.result')),
            toValidUTF8(toolspan_attr(SpanAttributes, 'output.value')),
            toValidUTF8(toolspan_attr(SpanAttributes, 'ai.toolCall.result')),
            toValidUTF8(toolspan_attr(SpanAttributes, 'traceloop.entity.output'))) AS result_raw,
        toValidUTF8(ifNull(toolspan_attr(SpanAttributes, 'traceloop.entity.input'), '')) AS a_traceloop_input,
        -- A LangChain ToolMessage as the result, its failure, and what the
        -- fingerprints read (derive.sql, tool_span).
        multiIf(
            JSONHas(result_text, 'output', 'lc'), JSONExtractRaw(result_text, 'output', 'kwargs'),
            JSONHas(result_text, 'lc'), JSONExtractRaw(result_text, 'kwargs'),
            JSONExtractString(result_text, 'type') = 'tool' AND JSONHas(result_text, 'data', 'tool_call_id'),
                JSONExtractRaw(result_text, 'data'),
            NULL) AS result_message,
        JSONExtractString(result_message, 'status') = 'error' AS result_failed,
        if(JSONHas(result_message, 'content'), JSONExtractRaw(result_message, 'content'), result_text) AS result_value,
        if(JSONHas(arguments_text, 'inputs')
               AND (JSONHas(arguments_text, 'metadata') OR JSONHas(arguments_text, 'tags')),
           JSONExtractRaw(arguments_text, 'inputs'), arguments_text) AS arguments_value,
        -- The first exception event's exception.type ('exception' when it names none).
        toValidUTF8(nullIf(arrayFirst(t -> t <> '', $exception_types), '')) AS exception_type,
        -- A LangChain.js failure string's class (derive.sql, exception_class).
        if(exception_type = 'exception',
           coalesce(nullIf(extract(toValidUTF8(StatusMessage), '\\n\\n([A-Za-z_][A-Za-z0-9_]*): '), ''),
                    exception_type),
           exception_type) AS exception_class,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.result.hash')) AS a_result_hash,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.error_code')) AS a_error_code,
        toValidUTF8(toolspan_attr(SpanAttributes, 'error.type')) AS a_error_type,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.retryable')) AS a_retryable,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.attempts')) AS a_attempts,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.total_wait_s')) AS a_total_wait_s,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.retry_after_s')) AS a_retry_after_s,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.retry.initiator')) AS a_initiator,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.attempt.outcome')) AS a_outcome,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.read_back')) AS a_read_back,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.resource.key')) AS a_resource_key,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.tool.keys_honoured')) AS a_keys_honoured,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.retry.delay_s')) AS a_delay_s,
        toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.retry.elapsed_wait_s')) AS a_elapsed_wait_s,
        toValidUTF8(toolspan_attr(SpanAttributes, 'http.response.status_code')) AS a_http_status,
        -- The arguments' and the result's fingerprints through one canonical-JSON
        -- expression (ClickHouse's planning time grows with a statement's length);
        -- each only where no hash is given (NULL skips it): a result captured
        -- beside its hash was 1.3 s of 1.9 s on 1M spans.
        arrayMap(text -> lower(hex(SHA256(toolspan_canonical_json(text)))),
                 [if(a_args_hash IS NULL, arguments_value, NULL),
                  if(a_result_hash IS NULL, result_value, NULL)]) AS fingerprints
    FROM $source
    WHERE $range
      AND (toolspan_has(SpanAttributes, 'toolspan.attempt')
           OR toolspan_attr(SpanAttributes, 'gen_ai.operation.name') = 'execute_tool'
           OR startsWith(SpanName, 'execute_tool')
           OR toolspan_attr(SpanAttributes, 'openinference.span.kind') = 'TOOL'
           -- Vercel AI SDK <= 6 (experimental_telemetry).
           OR SpanName = 'ai.toolCall')
    LIMIT 1 BY TraceId, SpanId
)

-- name: trace_conversations
-- A trace's conversation (the least id on any of its spans in range), for the
-- tool spans that do not carry one themselves. Only traces with tool spans.
SELECT TraceId AS trace_id, toValidUTF8(min(coalesce(
        toolspan_attr(SpanAttributes, 'gen_ai.conversation.id'),
        toolspan_attr(SpanAttributes, 'session.id'),
        toolspan_attr(SpanAttributes, 'ai.telemetry.metadata.sessionId'), ''))) AS conversation_id
FROM $source
WHERE $range
  AND (toolspan_has(SpanAttributes, 'gen_ai.conversation.id') OR toolspan_has(SpanAttributes, 'session.id')
       OR toolspan_has(SpanAttributes, 'ai.telemetry.metadata.sessionId'))
  AND TraceId IN (SELECT trace_id FROM _toolspan_tool_spans)
GROUP BY trace_id

-- name: tool_calls
-- One row per logical tool call. The same call seen by two instrumentations
-- (e.g. Pydantic AI's execute_tool span around toolspan's call span) is one
-- call: the richer span (toolspan > genai > openinference) is kept when the
-- two are parent and child or share the tool-call id.
WITH call_key AS (
    SELECT
        trace_id, span_id, parent_span_id, call_id, tool,
        multiIf(source = 'toolspan', 3, source = 'genai', 2, 1) AS richness
    FROM _toolspan_tool_spans
    WHERE source <> 'attempt'
),
-- Only a span below the richest kind can be dominated: those few (none where
-- every call is toolspan's) are the join's right side, which it holds in memory.
weak_key AS (
    SELECT * FROM call_key WHERE richness < 3
),
dominated AS (
    SELECT weak.trace_id AS trace_id, weak.span_id AS span_id
    FROM call_key AS strong
    JOIN weak_key AS weak ON strong.trace_id = weak.trace_id AND strong.parent_span_id = weak.span_id
    WHERE strong.richness > weak.richness AND isNotDistinctFrom(strong.tool, weak.tool)
    UNION DISTINCT
    SELECT weak.trace_id AS trace_id, weak.span_id AS span_id
    FROM call_key AS strong
    JOIN weak_key AS weak ON strong.trace_id = weak.trace_id AND strong.span_id = weak.parent_span_id
    WHERE strong.richness > weak.richness AND isNotDistinctFrom(strong.tool, weak.tool)
    UNION DISTINCT
    SELECT weak.trace_id AS trace_id, weak.span_id AS span_id
    FROM call_key AS strong
    JOIN weak_key AS weak ON strong.trace_id = weak.trace_id AND strong.call_id = weak.call_id
    WHERE strong.richness > weak.richness AND isNotDistinctFrom(strong.tool, weak.tool)
),
-- Attempt spans counted only for the calls that do not state their attempts
-- (toolspan's do): the join holds its right side in memory, and counting every
-- call's attempts was 1.2 of this statement's 1.6 s on 10M spans.
attempt_count AS (
    SELECT trace_id, parent_span_id AS span_id, toInt64(count()) AS attempts
    FROM _toolspan_tool_spans
    WHERE source = 'attempt'
      AND (trace_id, parent_span_id) IN (
          SELECT trace_id, span_id FROM _toolspan_tool_spans
          WHERE source <> 'attempt' AND attempts_attr IS NULL)
    GROUP BY trace_id, parent_span_id
),
call AS (
    SELECT
        c.trace_id AS trace_id, c.span_id AS span_id, c.parent_span_id AS parent_span_id,
        c.request_id AS request_id, c.turn_id AS turn_id, c.tool AS tool, c.call_id AS call_id,
        c.idempotency_key AS idempotency_key, c.replayed AS replayed,
        c.args_fingerprint AS args_fingerprint, c.arguments AS arguments,
        c.result_hash AS result_hash, c.result_fingerprint AS result_fingerprint,
        c.error_code AS error_code, c.status_code AS status_code, c.retryable AS retryable,
        c.total_wait_s AS total_wait_s, c.retry_after_s AS retry_after_s,
        c.retry_initiator AS retry_initiator, c.start_time AS start_time, c.end_time AS end_time,
        c.duration_ms AS duration_ms, c.source AS source,
        c.read_back AS read_back, c.resource_key AS resource_key,
        c.keys_honoured AS keys_honoured,
        coalesce(c.conversation_attr, tc.conversation_id, c.trace_id) AS conversation_id,
        multiIf(
            c.tool IS NOT NULL AND arrayExists(pattern -> match(assumeNotNull(c.tool), pattern), $write_tools), 'write',
            c.side_effect_attr IS NOT NULL OR c.source = 'toolspan', c.side_effect_attr,
            notEmpty($write_tools), 'none',
            NULL) AS side_effect,
        coalesce(c.status_attr, if(c.status_code = 'ERROR' OR c.error_code IS NOT NULL, 'error', 'succeeded')) AS status,
        coalesce(c.attempts_attr, ac.attempts, if(c.source = 'toolspan', 0, 1)) AS attempts
    FROM _toolspan_tool_spans AS c
    -- ANY: one row per key on the right (grouped by it), which ClickHouse then
    -- need not look past (12% of this statement on 10M spans).
    LEFT ANY JOIN _toolspan_trace_conversations AS tc ON tc.trace_id = c.trace_id
    LEFT ANY JOIN attempt_count AS ac ON ac.trace_id = c.trace_id AND ac.span_id = c.span_id
    WHERE c.source <> 'attempt'
      AND (c.trace_id, c.span_id) NOT IN (SELECT trace_id, span_id FROM dominated)
)
SELECT
    trace_id, span_id, parent_span_id, conversation_id, request_id, turn_id, tool, call_id,
    side_effect, idempotency_key, coalesce(replayed, false) AS replayed, args_fingerprint,
    arguments,
    -- The loop answer: the result on success, the error code on failure.
    if(status = 'succeeded',
       coalesce(result_hash, result_fingerprint, 'ok'),
       coalesce(error_code, status_code)) AS answer,
    coalesce(result_hash, result_fingerprint) AS result_hash,
    status, error_code, retryable, attempts, total_wait_s, retry_after_s, retry_initiator,
    start_time, end_time, duration_ms, source, read_back, resource_key, keys_honoured
FROM call

-- name: attempt_rows
SELECT
    a.trace_id AS trace_id, a.span_id AS span_id, a.parent_span_id AS call_span_id,
    coalesce(a.conversation_attr, tc.conversation_id, a.trace_id) AS conversation_id,
    a.tool AS tool, a.attempt AS attempt, a.outcome AS outcome, a.delay_s AS delay_s,
    a.elapsed_wait_s AS elapsed_wait_s, a.error_type AS error_type, a.http_status AS http_status,
    a.status_code AS status_code, a.start_time AS start_time, a.end_time AS end_time,
    a.duration_ms AS duration_ms, a.read_back AS read_back
FROM _toolspan_tool_spans AS a
LEFT ANY JOIN _toolspan_trace_conversations AS tc ON tc.trace_id = a.trace_id
WHERE a.source = 'attempt'

-- name: attempts
SELECT
    trace_id, span_id, call_span_id, conversation_id, tool, attempt, outcome, delay_s,
    elapsed_wait_s, error_type, http_status, status_code, start_time, end_time, duration_ms
FROM _toolspan_attempt_rows

-- name: conversations
SELECT
    conversation_id,
    count() AS calls,
    sum(attempts) AS attempts,
    countIf(status <> 'succeeded') AS failed_calls,
    min(start_time) AS first_seen,
    max(end_time) AS last_seen,
    arraySort(groupUniqArray(tool)) AS tools
FROM tool_calls
GROUP BY conversation_id
