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
-- execute_tool spans, OpenInference and MLflow TOOL spans) and the model's requested tool
-- calls in LLM spans (derive.sql, extract_requested_calls: one row per
-- request, request_no 1, 2, ...; a tool span's row has request_no 0), once per
-- trace and span id however often the collector delivered them. Only these
-- rows are read on.
SELECT
    trace_id,
    span_id,
    request_no,
    parent_span_id,
    multiIf(
        is_request, 'requested',
        a_attempt IS NOT NULL, 'attempt',
        scope_name = 'toolspan' OR a_status IS NOT NULL, 'toolspan',
        a_oi_kind = 'TOOL', 'openinference',
        name = 'ai.toolCall', 'vercel',
        a_langfuse_type = 'tool', 'langfuse',
        is_mlflow, 'mlflow',
        'genai') AS source,
    -- The result ToolMessage's name before the span's (derive.sql: OpenLLMetry JS);
    -- the span's name is MLflow's tool.
    if(is_request, request.1,
       coalesce(a_tool_name, a_oi_tool_name, a_vercel_tool_name, nullIf(JSONExtractString(result_message, 'name'), ''),
                nullIf(trimBoth(replaceRegexpOne(name, '^execute_tool', '')), ''))) AS tool,
    if(is_request, request.2, coalesce(a_call_id, a_oi_call_id, a_vercel_call_id)) AS call_id,
    coalesce(a_conversation, a_session, a_vercel_session) AS conversation_attr,
    -- A request carries nothing of its LLM span but its ids, conversation and end.
    if(is_request, NULL, a_request_id) AS request_id,
    if(is_request, NULL, a_turn_id) AS turn_id,
    if(is_request, NULL, a_side_effect) AS side_effect_attr,
    if(is_request, NULL, a_key) AS idempotency_key,
    if(is_request, NULL, accurateCastOrNull(a_replayed, 'Bool')) AS replayed,
    if(a_args_hash IS NOT NULL AND NOT is_request, a_args_hash, fingerprints[1]) AS args_fingerprint,
    call_arguments AS arguments,
    if(is_request, NULL, a_result_hash) AS result_hash,
    fingerprints[2] AS result_fingerprint,
    if(is_request, NULL, a_status) AS status_attr,
    -- Failures as derive.sql reads them: toolspan's code, error.type, else the
    -- exception event's type, the ERROR status's message (OpenAI Agents SDK
    -- via OpenInference) or a LangChain ToolMessage with status "error".
    if(is_request, NULL, coalesce(
        a_error_code, a_error_type,
        if(a_status IS NULL AND scope_name <> 'toolspan',
           coalesce(
               exception_class,
               if(status_code = 'ERROR', nullIf(trimBoth(status_message), ''), NULL),
               if(result_failed, 'tool_error', NULL)), NULL))) AS error_code,
    if(is_request, NULL, accurateCastOrNull(a_retryable, 'Bool')) AS retryable,
    if(is_request, NULL, toInt64OrNull(a_attempts)) AS attempts_attr,
    if(is_request, NULL, toFloat64OrNull(a_total_wait_s)) AS total_wait_s,
    if(is_request, NULL, toFloat64OrNull(a_retry_after_s)) AS retry_after_s,
    if(is_request, NULL, a_initiator) AS retry_initiator,
    if(is_request, NULL, toInt64OrNull(a_attempt)) AS attempt,
    if(is_request, NULL, a_outcome) AS outcome,
    if(is_request, NULL, a_read_back) AS read_back,
    if(is_request, NULL, a_resource_key) AS resource_key,
    if(is_request, NULL, a_keys_honoured) AS keys_honoured,
    if(is_request, NULL, toFloat64OrNull(a_delay_s)) AS delay_s,
    if(is_request, NULL, toFloat64OrNull(a_elapsed_wait_s)) AS elapsed_wait_s,
    if(is_request, NULL, a_error_type) AS error_type,
    if(is_request, NULL, toInt64OrNull(a_http_status)) AS http_status,
    if(is_request, 'UNSET', status_code) AS status_code,
    -- Microseconds, truncated, as the DuckDB path stores them; a request at
    -- its LLM span's end, without a duration (nothing ran).
    fromUnixTimestamp64Micro(intDiv(if(is_request, start_ns + duration_ns, start_ns), 1000), 'UTC') AS start_time,
    fromUnixTimestamp64Micro(intDiv(start_ns + duration_ns, 1000), 'UTC') AS end_time,
    if(is_request, NULL, duration_ns / 1e6) AS duration_ms
FROM (
    SELECT
        *,
        row.1 AS request_no,
        row.1 > 0 AS is_request,
        row.2 AS request,
        if(is_request, request.3, arguments_value) AS fingerprinted_arguments,
        -- The arguments' and the result's canonical JSON through one expression
        -- (ClickHouse's planning time grows with a statement's length); each only
        -- where no hash is given (NULL skips it): a result captured beside its
        -- hash was 1.3 s of 1.9 s on 1M spans.
        arrayMap(text -> toolspan_canonical_json(text),
                 [if(a_args_hash IS NULL OR is_request, fingerprinted_arguments, NULL),
                  if(a_result_hash IS NULL AND NOT is_request, result_value, NULL)]) AS canonical_texts,
        arrayMap(text -> lower(hex(SHA256(text))), canonical_texts) AS fingerprints,
        -- A request's arguments as canonical JSON (derive.sql,
        -- canonical_requested_arguments): the engines write a JSON object's
        -- numbers each their own way (2.0 or 2).
        if(is_request, canonical_texts[1], arguments_text) AS call_arguments
    FROM (
        SELECT
            TraceId AS trace_id,
            SpanId AS span_id,
            nullIf(ParentSpanId, '') AS parent_span_id,
            toValidUTF8(SpanName) AS name,
            ScopeName AS scope_name,
            upper(StatusCode) AS status_code,
            toValidUTF8(StatusMessage) AS status_message,
            toUnixTimestamp64Nano(Timestamp) AS start_ns,
            toInt64(Duration) AS duration_ns,
            -- Text that leaves ClickHouse must be valid UTF-8 (a driver would turn it
            -- into hex): invalid sequences become U+FFFD, as a JSON decoder does.
            toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.attempt')) AS a_attempt,
            toValidUTF8(toolspan_attr(SpanAttributes, 'toolspan.status')) AS a_status,
            toValidUTF8(toolspan_attr(SpanAttributes, 'openinference.span.kind')) AS a_oi_kind,
            -- Langfuse SDK (v3+): an observation of type tool (derive.sql).
            toValidUTF8(toolspan_attr(SpanAttributes, 'langfuse.observation.type')) AS a_langfuse_type,
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
            -- MLflow JSON-encodes every attribute value, its span type too.
            ifNull(toolspan_attr(SpanAttributes, 'mlflow.spanType') = '"TOOL"', false) AS is_mlflow,
            -- The function's bound parameters: MLflow's and Langfuse's (derive.sql).
            is_mlflow OR ifNull(a_langfuse_type = 'tool', false) AS binds_parameters,
            -- Its inputs/outputs as the value's JSON: a text is '"A1"', capture
            -- redacted '"[REDACTED]"' (derive.sql, mlflow_span).
            toValidUTF8(toolspan_attr(SpanAttributes, 'mlflow.spanInputs')) AS a_mlflow_inputs,
            toValidUTF8(toolspan_attr(SpanAttributes, 'mlflow.spanOutputs')) AS a_mlflow_outputs,
            -- NULL when not recorded: empty, or OpenInference's (Strands') placeholder
            -- with content capture off (derive.sql, toolspan_recorded).
            if(trimBoth(ifNull(arguments_raw, '')) IN ('', '__REDACTED__', '[REDACTED]'), NULL, arguments_raw) AS arguments_text,
            if(trimBoth(ifNull(result_raw, '')) IN ('', '__REDACTED__', '[REDACTED]'), NULL, result_raw) AS result_text,
            -- Strands Agents' events last (derive.sql, tool_span).
            coalesce(
                toValidUTF8(toolspan_attr(SpanAttributes, 'gen_ai.tool.call.arguments')),
                toValidUTF8(toolspan_attr(SpanAttributes, 'input.value')),
                toValidUTF8(toolspan_attr(SpanAttributes, 'ai.toolCall.args')),
                toValidUTF8(toolspan_attr(SpanAttributes, 'langfuse.observation.input')),
                -- OpenLLMetry JS: {"args": ["<the tool's input>"]} (derive.sql).
                if(JSONType(a_traceloop_input, 'args', 1) = 'String',
                   JSONExtractString(a_traceloop_input, 'args', 1), NULL),
                if(JSONType(a_mlflow_inputs) = 'String', JSONExtractString(a_mlflow_inputs), a_mlflow_inputs),
                if(startsWith(SpanName, 'execute_tool'), toValidUTF8($event_arguments), NULL)) AS arguments_raw,
            coalesce(
                toValidUTF8(toolspan_attr(SpanAttributes, 'gen_ai.tool.call.result')),
                toValidUTF8(toolspan_attr(SpanAttributes, 'output.value')),
                toValidUTF8(toolspan_attr(SpanAttributes, 'ai.toolCall.result')),
                toValidUTF8(toolspan_attr(SpanAttributes, 'langfuse.observation.output')),
                toValidUTF8(toolspan_attr(SpanAttributes, 'traceloop.entity.output')),
                if(JSONType(a_mlflow_outputs) = 'String', JSONExtractString(a_mlflow_outputs), a_mlflow_outputs),
                if(startsWith(SpanName, 'execute_tool'), toValidUTF8($event_result), NULL)) AS result_raw,
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
            multiIf(
                JSONHas(arguments_text, 'inputs')
                    AND (JSONHas(arguments_text, 'metadata') OR JSONHas(arguments_text, 'tags')),
                JSONExtractRaw(arguments_text, 'inputs'),
                -- Bound parameters of f(**kwargs) / f(*args, **kwargs), cut out of
                -- the text as written (derive.sql): JSONExtractRaw writes 2.0 as 2.
                binds_parameters AND isValidJSON(ifNull(arguments_text, ''))
                    AND arraySort(JSONExtractKeys(ifNull(arguments_text, ''))) IN (['kwargs'], ['args', 'kwargs']),
                coalesce(nullIf(extract(arguments_text,
                    '(?s)\\A\\s*\\{\\s*(?:"args"\\s*:\\s*\\[\\s*\\]\\s*,\\s*)?"kwargs"\\s*:\\s*(\\{.*\\})\\s*(?:,\\s*"args"\\s*:\\s*\\[\\s*\\]\\s*)?\\}\\s*\\z'), ''),
                    arguments_text),
                arguments_text) AS arguments_value,
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
            (toolspan_has(SpanAttributes, 'toolspan.attempt')
             OR toolspan_attr(SpanAttributes, 'gen_ai.operation.name') = 'execute_tool'
             OR startsWith(SpanName, 'execute_tool')
             OR toolspan_attr(SpanAttributes, 'openinference.span.kind') = 'TOOL'
             -- Vercel AI SDK <= 6 (experimental_telemetry).
             OR SpanName = 'ai.toolCall'
             OR toolspan_attr(SpanAttributes, 'langfuse.observation.type') = 'tool'
             OR is_mlflow) AS is_tool_span,
            -- The model's requested calls (name, id, arguments), as derive.sql's
            -- requested_positions reads them: OpenInference's and OpenLLMetry's
            -- flattened output messages ($flat_requests), else GenAI semconv's
            -- gen_ai.output.messages parts of type tool_call. Output messages only.
            arrayExists(k -> match(k, $flat_request_key), $attribute_keys) AS has_flat_requests,
            arrayFilter(r -> r.1 IS NOT NULL, if(has_flat_requests, $flat_requests, arrayFlatten(arrayMap(
                m -> arrayMap(
                    part -> (
                        JSONExtract(part, 'name', 'Nullable(String)'),
                        JSONExtract(part, 'id', 'Nullable(String)'),
                        if(JSONType(part, 'arguments') = 'String',
                           JSONExtractString(part, 'arguments'), JSONExtractRaw(part, 'arguments'))),
                    arrayFilter(part -> JSONExtractString(part, 'type') = 'tool_call', JSONExtractArrayRaw(m, 'parts'))),
                JSONExtractArrayRaw(ifNull(toValidUTF8(toolspan_attr(SpanAttributes, 'gen_ai.output.messages')), '')))))) AS requests,
            arrayConcat(
                if(is_tool_span, [(toUInt64(0), (NULL, NULL, NULL))], []),
                arrayMap((r, i) -> (toUInt64(i), (toValidUTF8(r.1), toValidUTF8(r.2),
                                    if(trimBoth(ifNull(r.3, '')) IN ('', '__REDACTED__', '[REDACTED]'), NULL, toValidUTF8(r.3)))),
                         requests, arrayEnumerate(requests))) AS span_rows
        FROM $source
        WHERE $range
          AND (toolspan_has(SpanAttributes, 'toolspan.attempt')
               OR toolspan_attr(SpanAttributes, 'gen_ai.operation.name') = 'execute_tool'
               OR startsWith(SpanName, 'execute_tool')
               OR toolspan_attr(SpanAttributes, 'openinference.span.kind') = 'TOOL'
               OR SpanName = 'ai.toolCall'
               OR toolspan_attr(SpanAttributes, 'langfuse.observation.type') = 'tool'
               OR toolspan_attr(SpanAttributes, 'mlflow.spanType') = '"TOOL"'
               OR arrayExists(k -> match(k, $flat_request_key) OR k = 'gen_ai.output.messages', $attribute_keys))
        LIMIT 1 BY TraceId, SpanId
    )
    ARRAY JOIN span_rows AS row
)

-- name: trace_conversations
-- A trace's conversation (the least id on any of its spans in range), for the
-- tool spans that do not carry one themselves. Only traces with tool spans.
SELECT TraceId AS trace_id, toValidUTF8(min(coalesce(
        toolspan_attr(SpanAttributes, 'gen_ai.conversation.id'),
        toolspan_attr(SpanAttributes, 'session.id'),
        toolspan_attr(SpanAttributes, 'ai.telemetry.metadata.sessionId'),
        -- Vercel AI SDK 7 (@ai-sdk/otel): the app's runtimeContext.sessionId (derive.sql).
        toolspan_attr(SpanAttributes, 'ai.settings.context.sessionId'), ''))) AS conversation_id
FROM $source
WHERE $range
  AND (toolspan_has(SpanAttributes, 'gen_ai.conversation.id') OR toolspan_has(SpanAttributes, 'session.id')
       OR toolspan_has(SpanAttributes, 'ai.telemetry.metadata.sessionId')
       OR toolspan_has(SpanAttributes, 'ai.settings.context.sessionId'))
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
    -- Requested calls are matched below (executed_request).
    WHERE source NOT IN ('attempt', 'requested')
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
-- A requested call that a tool span of the same trace stands for (derive.sql,
-- forget_executed_requests): the same call id; or, where the ids do not tell
-- (a tool span without an id or with one no request names, a request without
-- one), a tool span of the same tool.
requested_key AS (
    SELECT trace_id, span_id, request_no, call_id, tool
    FROM _toolspan_tool_spans
    WHERE source = 'requested'
),
executed_key AS (
    SELECT trace_id, call_id, tool
    FROM _toolspan_tool_spans
    WHERE source NOT IN ('attempt', 'requested')
      AND trace_id IN (SELECT trace_id FROM requested_key)
),
loose_key AS (
    SELECT trace_id, tool FROM executed_key
    WHERE call_id IS NULL
       OR (trace_id, call_id) NOT IN (
           SELECT trace_id, call_id FROM requested_key WHERE call_id IS NOT NULL)
),
executed_request AS (
    SELECT r.trace_id AS trace_id, r.span_id AS span_id, r.request_no AS request_no
    FROM requested_key AS r
    JOIN executed_key AS e ON e.trace_id = r.trace_id AND e.call_id = r.call_id
    UNION DISTINCT
    SELECT r.trace_id AS trace_id, r.span_id AS span_id, r.request_no AS request_no
    FROM requested_key AS r
    JOIN loose_key AS l ON l.trace_id = r.trace_id AND l.tool = r.tool
    UNION DISTINCT
    SELECT r.trace_id AS trace_id, r.span_id AS span_id, r.request_no AS request_no
    FROM requested_key AS r
    JOIN executed_key AS e ON e.trace_id = r.trace_id AND e.tool = r.tool
    WHERE r.call_id IS NULL
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
        coalesce(c.status_attr, multiIf(
            c.source = 'requested', 'requested',
            c.status_code = 'ERROR' OR c.error_code IS NOT NULL, 'error',
            'succeeded')) AS status,
        coalesce(c.attempts_attr, ac.attempts, if(c.source IN ('toolspan', 'requested'), 0, 1)) AS attempts
    FROM _toolspan_tool_spans AS c
    -- ANY: one row per key on the right (grouped by it), which ClickHouse then
    -- need not look past (12% of this statement on 10M spans).
    LEFT ANY JOIN _toolspan_trace_conversations AS tc ON tc.trace_id = c.trace_id
    LEFT ANY JOIN attempt_count AS ac ON ac.trace_id = c.trace_id AND ac.span_id = c.span_id
    WHERE c.source <> 'attempt'
      AND (c.trace_id, c.span_id) NOT IN (SELECT trace_id, span_id FROM dominated)
      AND (c.trace_id, c.span_id, c.request_no) NOT IN (
          SELECT trace_id, span_id, request_no FROM executed_request)
)
SELECT
    trace_id, span_id, parent_span_id, conversation_id, request_id, turn_id, tool, call_id,
    side_effect, idempotency_key, coalesce(replayed, false) AS replayed, args_fingerprint,
    arguments,
    -- The loop answer: the result on success, the error code on failure,
    -- 'requested' for a requested call (derive.sql, insert_tool_calls).
    multiIf(status = 'succeeded', coalesce(result_hash, result_fingerprint, 'ok'),
            status = 'requested', 'requested',
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
    countIf(status NOT IN ('succeeded', 'requested')) AS failed_calls,
    min(start_time) AS first_seen,
    max(end_time) AS last_seen,
    arraySort(groupUniqArray(tool)) AS tools
FROM tool_calls
GROUP BY conversation_id
