-- The materialised rows behind tool_calls, attempts and findings. A tool call
-- depends only on the spans of its own trace (its conversation, the spans that
-- dominate it, its attempts) and on write_tools, so an ingest recomputes the
-- traces it touched (pending_traces) and nothing else; then the findings.

-- name: side_effect_macro
-- Tools the user names as writes are writes, whatever their spans say: a
-- declaration can be wrong, and that is exactly when retries hurt. The
-- patterns are read once as a list (a correlated EXISTS per call was planned
-- as a delim join over every call, ~0.07 CPU s per 1M spans).
CREATE OR REPLACE MACRO toolspan_side_effect(tool_name, declared, span_source) AS
    CASE
        WHEN len(list_filter((SELECT list(pattern) FROM write_tools), lambda p: tool_name GLOB p)) > 0 THEN 'write'
        WHEN declared IS NOT NULL OR span_source = 'toolspan' THEN declared
        WHEN EXISTS (SELECT 1 FROM write_tools) THEN 'none'
    END;

-- name: recorded_macro
-- A text the instrumentation recorded, NULL when it did not: empty, or
-- OpenInference's placeholder with content capture off (Strands Agents'
-- events: [REDACTED]). Two calls whose
-- arguments were not recorded must never look alike (findings.sql).
CREATE OR REPLACE MACRO toolspan_recorded(text) AS
    CASE WHEN trim(text) NOT IN ('', '__REDACTED__', '[REDACTED]') THEN text END;

-- name: json_text_macro
-- The text a JSON string holds ('"A1"' -> A1); any other value as it is.
-- MLflow JSON-encodes every attribute value, its inputs and outputs too.
CREATE OR REPLACE MACRO toolspan_json_text(value) AS
    CASE WHEN json_valid(value) AND json_type(value) = 'VARCHAR'
        THEN json_extract_string(value, '$')
        ELSE value
    END;

-- name: refresh_scope
-- Where the pending spans start in span_rows, and whether a pending trace had
-- spans stored before (schema.sql, pending_batches); without a row, every span.
-- A known trace's earlier spans lie anywhere: then from the first span on.
SELECT
    CASE WHEN coalesce(bool_or(known_traces), true) THEN 0 ELSE min(first_rowid) END,
    coalesce(bool_or(known_traces), true)
FROM pending_batches;

-- name: remember_old_pending
-- A database left pending by an analyzer without pending_batches: its pending
-- traces are read from the first span on.
INSERT INTO pending_batches
SELECT 0, true
WHERE EXISTS (SELECT 1 FROM pending_traces) AND NOT EXISTS (SELECT 1 FROM pending_batches);

-- name: count_calls
SELECT count(*) FROM tool_call_rows;

-- name: touched_traces
CREATE OR REPLACE TEMP TABLE touched_traces AS
SELECT DISTINCT trace_id FROM pending_traces;

-- name: attribute_positions
-- Where each attribute the refresh reads sits in each list of keys (NULL when
-- absent), once per shape: the statements below then take a span's value by
-- its position (attribute_vals["gen_ai.tool.name"]) instead of searching the
-- span's key list for every attribute of every span (~0.25 CPU s per 1M spans).
CREATE OR REPLACE TEMP TABLE attribute_positions AS
SELECT
    shape AS attribute_shape,
    list_position(keys, 'ai.settings.context.sessionId') AS "ai.settings.context.sessionId",
    list_position(keys, 'ai.telemetry.metadata.sessionId') AS "ai.telemetry.metadata.sessionId",
    list_position(keys, 'ai.toolCall.args') AS "ai.toolCall.args",
    list_position(keys, 'ai.toolCall.id') AS "ai.toolCall.id",
    list_position(keys, 'ai.toolCall.name') AS "ai.toolCall.name",
    list_position(keys, 'ai.toolCall.result') AS "ai.toolCall.result",
    list_position(keys, 'error.type') AS "error.type",
    list_position(keys, 'gen_ai.conversation.id') AS "gen_ai.conversation.id",
    list_position(keys, 'gen_ai.operation.name') AS "gen_ai.operation.name",
    list_position(keys, 'gen_ai.tool.call.arguments') AS "gen_ai.tool.call.arguments",
    list_position(keys, 'gen_ai.tool.call.id') AS "gen_ai.tool.call.id",
    list_position(keys, 'gen_ai.tool.call.result') AS "gen_ai.tool.call.result",
    list_position(keys, 'gen_ai.tool.name') AS "gen_ai.tool.name",
    list_position(keys, 'http.response.status_code') AS "http.response.status_code",
    list_position(keys, 'input.value') AS "input.value",
    list_position(keys, 'langfuse.observation.input') AS "langfuse.observation.input",
    list_position(keys, 'langfuse.observation.output') AS "langfuse.observation.output",
    list_position(keys, 'langfuse.observation.type') AS "langfuse.observation.type",
    list_position(keys, 'mlflow.spanInputs') AS "mlflow.spanInputs",
    list_position(keys, 'mlflow.spanOutputs') AS "mlflow.spanOutputs",
    list_position(keys, 'mlflow.spanType') AS "mlflow.spanType",
    list_position(keys, 'openinference.span.kind') AS "openinference.span.kind",
    list_position(keys, 'output.value') AS "output.value",
    list_position(keys, 'session.id') AS "session.id",
    list_position(keys, 'tool.name') AS "tool.name",
    list_position(keys, 'tool_call.id') AS "tool_call.id",
    list_position(keys, 'traceloop.entity.input') AS "traceloop.entity.input",
    list_position(keys, 'traceloop.entity.output') AS "traceloop.entity.output",
    list_position(keys, 'toolspan.args.hash') AS "toolspan.args.hash",
    list_position(keys, 'toolspan.attempt') AS "toolspan.attempt",
    list_position(keys, 'toolspan.attempt.outcome') AS "toolspan.attempt.outcome",
    list_position(keys, 'toolspan.attempts') AS "toolspan.attempts",
    list_position(keys, 'toolspan.error_code') AS "toolspan.error_code",
    list_position(keys, 'toolspan.idempotency.key') AS "toolspan.idempotency.key",
    list_position(keys, 'toolspan.idempotency.replayed') AS "toolspan.idempotency.replayed",
    list_position(keys, 'toolspan.read_back') AS "toolspan.read_back",
    list_position(keys, 'toolspan.request.id') AS "toolspan.request.id",
    list_position(keys, 'toolspan.resource.key') AS "toolspan.resource.key",
    list_position(keys, 'toolspan.result.hash') AS "toolspan.result.hash",
    list_position(keys, 'toolspan.retry.delay_s') AS "toolspan.retry.delay_s",
    list_position(keys, 'toolspan.retry.elapsed_wait_s') AS "toolspan.retry.elapsed_wait_s",
    list_position(keys, 'toolspan.retry.initiator') AS "toolspan.retry.initiator",
    list_position(keys, 'toolspan.retry_after_s') AS "toolspan.retry_after_s",
    list_position(keys, 'toolspan.retryable') AS "toolspan.retryable",
    list_position(keys, 'toolspan.side_effect') AS "toolspan.side_effect",
    list_position(keys, 'toolspan.status') AS "toolspan.status",
    list_position(keys, 'toolspan.total_wait_s') AS "toolspan.total_wait_s",
    list_position(keys, 'toolspan.turn.id') AS "toolspan.turn.id",
    list_position(keys, 'toolspan.tool.keys_honoured') AS "toolspan.tool.keys_honoured"
FROM attribute_shapes;

-- name: extract_tool_spans
-- Tool spans of every instrumentation: toolspan call and attempt spans, GenAI
-- execute_tool spans, OpenInference and MLflow TOOL spans, of the touched traces, with
-- the attributes the views need extracted (the arguments/results without a
-- hash are fingerprinted next, fingerprint_tool_spans). Message-history
-- attributes are never read: they repeat earlier turns. A temporary table:
-- the refresh reads every span of a touched trace again anyway, so storing
-- them (and deleting them for the next refresh) only cost time.
CREATE OR REPLACE TEMP TABLE touched_tool_spans AS
WITH tool_span_list AS (
    SELECT *
    FROM span_rows
    LEFT JOIN attribute_positions USING (attribute_shape)
    WHERE trace_id IN (SELECT trace_id FROM touched_traces)
      -- The first rowid of the pending batches (refresh_scope): 0 when a
      -- touched trace had spans stored before them.
      AND span_rows.rowid >= ?
      AND (
        attribute_vals["toolspan.attempt"] IS NOT NULL
        OR attribute_vals["gen_ai.operation.name"] = 'execute_tool'
        OR starts_with(name, 'execute_tool')
        OR attribute_vals["openinference.span.kind"] = 'TOOL'
        -- Vercel AI SDK <= 6 (experimental_telemetry).
        OR name = 'ai.toolCall'
        -- Langfuse SDK (v3+): an observation of type tool, named after the tool.
        OR attribute_vals["langfuse.observation.type"] = 'tool'
        -- MLflow tracing JSON-encodes every attribute value, its span type too.
        OR attribute_vals["mlflow.spanType"] = '"TOOL"')
),
mlflow_span AS (
    SELECT
        *,
        attribute_vals["mlflow.spanType"] = '"TOOL"' AS is_mlflow,
        -- Decorator instrumentations record the function's bound parameters
        -- ({"args": [...], "kwargs": {...}}): MLflow's TOOL spans, Langfuse's
        -- tool observations.
        attribute_vals["mlflow.spanType"] = '"TOOL"'
            OR attribute_vals["langfuse.observation.type"] = 'tool' AS binds_parameters,
        -- MLflow's inputs/outputs as the value's JSON: a text is '"A1"' (as
        -- OpenInference's bare A1 once decoded), capture redacted '"[REDACTED]"'.
        toolspan_json_text(attribute_vals["mlflow.spanInputs"]) AS mlflow_inputs,
        toolspan_json_text(attribute_vals["mlflow.spanOutputs"]) AS mlflow_outputs
    FROM tool_span_list
),
tool_span AS (
    SELECT
        *,
        -- Strands Agents' events last (read_batch.sql): its attributes win
        -- when OTEL_SEMCONV_STABILITY_OPT_IN writes them too.
        toolspan_recorded(coalesce(
            attribute_vals["gen_ai.tool.call.arguments"], attribute_vals["input.value"],
            attribute_vals["ai.toolCall.args"],
            attribute_vals["langfuse.observation.input"],
            -- OpenLLMetry JS: only traceloop.entity.input, {"args": ["<the tool's input>"]}.
            CASE WHEN json_valid(attribute_vals["traceloop.entity.input"])
                     AND json_type(attribute_vals["traceloop.entity.input"], '$.args[0]') = 'VARCHAR'
                THEN json_extract_string(attribute_vals["traceloop.entity.input"], '$.args[0]')
            END,
            mlflow_inputs,
            event_arguments)) AS arguments_text,
        toolspan_recorded(coalesce(
            attribute_vals["gen_ai.tool.call.result"], attribute_vals["output.value"],
            attribute_vals["ai.toolCall.result"],
            attribute_vals["langfuse.observation.output"],
            -- OpenLLMetry JS: the serialized ToolMessage.
            attribute_vals["traceloop.entity.output"],
            mlflow_outputs,
            event_result)) AS result_text,
        -- The fields of a LangChain ToolMessage as the result: OpenInference's
        -- output.value (message_to_dict: {"type": "tool", "data": {...}}),
        -- a serialized one ({"lc": 1, ..., "kwargs": {...}}), or one under
        -- "output" in OpenLLMetry's callback envelope.
        CASE WHEN json_valid(result_text) THEN
            CASE
                WHEN json_extract_string(result_text, '$.output.lc') IS NOT NULL
                    THEN json_extract(result_text, '$.output.kwargs')
                WHEN json_extract_string(result_text, '$.lc') IS NOT NULL
                    THEN json_extract(result_text, '$.kwargs')
                WHEN json_extract_string(result_text, '$.type') = 'tool'
                    AND json_exists(result_text, '$.data.tool_call_id')
                    THEN json_extract(result_text, '$.data')
            END
        END AS result_message,
        -- A failure other instrumentations show only in the result: the
        -- ToolMessage's status "error" (a handled ToolException, span status OK).
        json_extract_string(result_message, '$.status') = 'error' AS result_failed,
        -- What the fingerprints read: the ToolMessage's content (its
        -- tool_call_id differs on every call), and OpenLLMetry's callback
        -- envelope's inputs (its graph step, checkpoint and call id differ too).
        coalesce(json_extract(result_message, '$.content')::VARCHAR, result_text) AS result_value,
        -- LangChain.js tracers (OpenInference JS) record a failure as a string,
        -- message + "\n\n" + stack, so its exception event names no type; the
        -- stack's first line does ("TimeoutError: payment gateway timed out").
        CASE WHEN exception_type = 'exception' THEN coalesce(
            nullif(regexp_extract(status_message, '\n\n([A-Za-z_][A-Za-z0-9_]*): ', 1), ''),
            exception_type) ELSE exception_type END AS exception_class,
        CASE
            WHEN json_valid(arguments_text)
                AND json_exists(arguments_text, '$.inputs')
                AND (json_exists(arguments_text, '$.metadata') OR json_exists(arguments_text, '$.tags'))
                THEN json_extract(arguments_text, '$.inputs')::VARCHAR
            -- The function's bound parameters (MLflow, Langfuse): a tool written as
            -- f(**kwargs) or f(*args, **kwargs) is {"kwargs": {...}} (with
            -- "args": []), the model's arguments one level down. Cut out of the
            -- text as written, not re-serialised (ClickHouse would write 2.0 as 2;
            -- clickhouse_derive.sql has the same pattern); other shapes as they are.
            WHEN binds_parameters AND json_valid(arguments_text)
                AND list_sort(json_keys(arguments_text)) IN (['kwargs'], ['args', 'kwargs'])
                THEN coalesce(nullif(regexp_extract(
                    arguments_text,
                    '(?s)\A\s*\{\s*(?:"args"\s*:\s*\[\s*\]\s*,\s*)?"kwargs"\s*:\s*(\{.*\})\s*(?:,\s*"args"\s*:\s*\[\s*\]\s*)?\}\s*\z',
                    1), ''), arguments_text)
            ELSE arguments_text
        END AS arguments_value
    FROM mlflow_span
)
SELECT
    trace_id,
    span_id,
    parent_span_id,
    CASE
        WHEN attribute_vals["toolspan.attempt"] IS NOT NULL THEN 'attempt'
        WHEN scope_name = 'toolspan' OR attribute_vals["toolspan.status"] IS NOT NULL THEN 'toolspan'
        WHEN attribute_vals["openinference.span.kind"] = 'TOOL' THEN 'openinference'
        WHEN name = 'ai.toolCall' THEN 'vercel'
        WHEN attribute_vals["langfuse.observation.type"] = 'tool' THEN 'langfuse'
        WHEN is_mlflow THEN 'mlflow'
        ELSE 'genai'
    END AS source,
    coalesce(
        attribute_vals["gen_ai.tool.name"],
        attribute_vals["tool.name"],
        attribute_vals["ai.toolCall.name"],
        -- The result ToolMessage's name before the span's: OpenLLMetry JS names
        -- every LangChain.js tool span by the tool's class (execute_tool
        -- DynamicStructuredTool) and sets no gen_ai.tool.name.
        nullif(json_extract_string(result_message, '$.name'), ''),
        -- The span's name: GenAI's execute_tool <name>; MLflow's the function's
        -- (or @mlflow.trace(name=...)), which names no tool otherwise.
        nullif(trim(regexp_replace(name, '^execute_tool', '')), '')
    ) AS tool,
    coalesce(
        attribute_vals["gen_ai.tool.call.id"], attribute_vals["tool_call.id"],
        attribute_vals["ai.toolCall.id"]) AS call_id,
    coalesce(
        attribute_vals["gen_ai.conversation.id"], attribute_vals["session.id"],
        attribute_vals["ai.telemetry.metadata.sessionId"]) AS conversation_attr,
    attribute_vals["toolspan.request.id"] AS request_id,
    attribute_vals["toolspan.turn.id"] AS turn_id,
    attribute_vals["toolspan.side_effect"] AS side_effect_attr,
    attribute_vals["toolspan.idempotency.key"] AS idempotency_key,
    TRY_CAST(attribute_vals["toolspan.idempotency.replayed"] AS BOOLEAN) AS replayed,
    -- Spans without toolspan.args.hash, and result texts, are fingerprinted by
    -- fingerprint_tool_spans.
    attribute_vals["toolspan.args.hash"] AS args_fingerprint,
    arguments_text AS arguments,
    arguments_value,
    attribute_vals["toolspan.result.hash"] AS result_hash,
    result_value AS result_text,
    NULL::VARCHAR AS result_fingerprint,
    attribute_vals["toolspan.status"] AS status_attr,
    -- Failures: toolspan's code, error.type, else (no foreign stack sets
    -- error.type) the exception event's type, the ERROR status's message (the
    -- OpenAI Agents SDK through OpenInference records no exception event:
    -- "Error running tool (non-fatal): {..., 'error': '<str(exception)>'}")
    -- or the result's shape.
    coalesce(
        attribute_vals["toolspan.error_code"],
        attribute_vals["error.type"],
        CASE WHEN attribute_vals["toolspan.status"] IS NULL AND scope_name IS DISTINCT FROM 'toolspan' THEN
            coalesce(
                exception_class,
                CASE WHEN status_code = 'ERROR' THEN nullif(trim(status_message), '') END,
                CASE WHEN result_failed THEN 'tool_error' END)
        END) AS error_code,
    TRY_CAST(attribute_vals["toolspan.retryable"] AS BOOLEAN) AS retryable,
    TRY_CAST(attribute_vals["toolspan.attempts"] AS BIGINT) AS attempts_attr,
    TRY_CAST(attribute_vals["toolspan.total_wait_s"] AS DOUBLE) AS total_wait_s,
    TRY_CAST(attribute_vals["toolspan.retry_after_s"] AS DOUBLE) AS retry_after_s,
    attribute_vals["toolspan.retry.initiator"] AS retry_initiator,
    TRY_CAST(attribute_vals["toolspan.attempt"] AS BIGINT) AS attempt,
    attribute_vals["toolspan.attempt.outcome"] AS outcome,
    attribute_vals["toolspan.read_back"] AS read_back,
    attribute_vals["toolspan.resource.key"] AS resource_key,
    attribute_vals["toolspan.tool.keys_honoured"] AS keys_honoured,
    TRY_CAST(attribute_vals["toolspan.retry.delay_s"] AS DOUBLE) AS delay_s,
    TRY_CAST(attribute_vals["toolspan.retry.elapsed_wait_s"] AS DOUBLE) AS elapsed_wait_s,
    attribute_vals["error.type"] AS error_type,
    TRY_CAST(attribute_vals["http.response.status_code"] AS BIGINT) AS http_status,
    status_code,
    start_time,
    end_time,
    duration_ms
FROM tool_span;

-- name: requested_positions
-- Where the model's requested tool calls sit in each list of keys: the LLM
-- span's output messages, flattened by OpenInference
-- (llm.output_messages.<i>.message.tool_calls.<j>.tool_call.function.name,
-- .function.arguments, .tool_call.id) and by OpenLLMetry's legacy attributes
-- (gen_ai.completion.<i>.tool_calls.<j>.name, .arguments, .id), one row per
-- (shape, message, call); else the position of GenAI semconv's
-- gen_ai.output.messages (JSON), call_no NULL. Output messages only: the
-- input messages echo the earlier requests, which must not count twice.
-- Once per shape, as attribute_positions; only shapes naming one of them.
CREATE OR REPLACE TEMP TABLE requested_positions AS
WITH shape_key AS (
    SELECT shape, unnest(keys) AS key, generate_subscripts(keys, 1) AS pos
    FROM attribute_shapes
    WHERE len(list_filter(keys, lambda k:
        starts_with(k, 'llm.output_messages.') OR starts_with(k, 'gen_ai.completion.')
        OR k = 'gen_ai.output.messages')) > 0
),
flat_key AS (
    SELECT shape, pos, regexp_extract(
        key,
        '^(?:llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(function\.name|function\.arguments|id)'
        || '|gen_ai\.completion\.(\d+)\.tool_calls\.(\d+)\.(name|arguments|id))$',
        ['oi_message', 'oi_call', 'oi_field', 'll_message', 'll_call', 'll_field']) AS m
    FROM shape_key
    WHERE key <> 'gen_ai.output.messages'
),
flat AS (
    SELECT
        shape,
        m.oi_field <> '' AS openinference,
        -- The indices as written: only grouped on, never a number (no overflow).
        coalesce(nullif(m.oi_message, ''), m.ll_message) AS message_no,
        coalesce(nullif(m.oi_call, ''), m.ll_call) AS call_no,
        replace(coalesce(nullif(m.oi_field, ''), m.ll_field), 'function.', '') AS field,
        pos
    FROM flat_key
    WHERE m.oi_field <> '' OR m.ll_field <> ''
),
flat_call AS (
    SELECT
        shape AS attribute_shape, openinference, message_no, call_no,
        max(pos) FILTER (WHERE field = 'name') AS name_pos,
        max(pos) FILTER (WHERE field = 'arguments') AS arguments_pos,
        max(pos) FILTER (WHERE field = 'id') AS id_pos,
        NULL::BIGINT AS messages_pos
    FROM flat
    GROUP BY ALL
)
SELECT * FROM flat_call
UNION ALL
-- The JSON messages only where no flattened call is named: an instrumentation
-- writing both would count each call twice.
SELECT shape, NULL, NULL::VARCHAR, NULL::VARCHAR, NULL, NULL, NULL, pos
FROM shape_key
WHERE key = 'gen_ai.output.messages' AND shape NOT IN (SELECT attribute_shape FROM flat_call);

-- name: count_requested_positions
SELECT count(*) FROM requested_positions;

-- name: extract_requested_calls
-- The model's requested tool calls (requested_positions) of the touched
-- traces, as tool spans of source 'requested': the LLM span's ids and
-- conversation, the requested tool, call id and arguments. Nothing says
-- whether or how they ran (forget_executed_requests drops those a tool span
-- stands for): their status is 'requested' (insert_tool_calls).
INSERT INTO touched_tool_spans BY NAME
WITH llm_span AS (
    SELECT s.trace_id, s.span_id, s.parent_span_id, s.attribute_vals, s.attribute_shape,
           s.start_time, s.end_time,
           coalesce(
               s.attribute_vals[ap."gen_ai.conversation.id"], s.attribute_vals[ap."session.id"],
               s.attribute_vals[ap."ai.telemetry.metadata.sessionId"]) AS conversation_attr
    FROM span_rows AS s
    LEFT JOIN attribute_positions AS ap USING (attribute_shape)
    WHERE s.trace_id IN (SELECT trace_id FROM touched_traces)
      AND s.rowid >= ?  -- as in extract_tool_spans
      AND s.attribute_shape IN (SELECT attribute_shape FROM requested_positions)
),
flat_request AS (
    SELECT
        l.trace_id, l.span_id, l.parent_span_id, l.conversation_attr, l.start_time, l.end_time,
        p.message_no, p.call_no,
        l.attribute_vals[p.name_pos] AS tool,
        l.attribute_vals[p.id_pos] AS call_id,
        l.attribute_vals[p.arguments_pos] AS arguments
    FROM llm_span AS l
    JOIN requested_positions AS p USING (attribute_shape)
    WHERE p.messages_pos IS NULL
),
message_list AS (
    SELECT l.trace_id, l.span_id, l.parent_span_id, l.conversation_attr, l.start_time, l.end_time,
           l.attribute_vals[p.messages_pos] AS messages
    FROM llm_span AS l
    JOIN requested_positions AS p USING (attribute_shape)
    WHERE p.messages_pos IS NOT NULL
),
message AS (
    SELECT * EXCLUDE (messages),
           unnest(json_extract(messages, '$[*]')) AS message,
           (generate_subscripts(json_extract(messages, '$[*]'), 1) - 1)::VARCHAR AS message_no
    FROM message_list
    WHERE json_valid(messages) AND json_type(messages) = 'ARRAY'
),
part AS (
    SELECT * EXCLUDE (message),
           unnest(json_extract(message, '$.parts[*]')) AS part,
           (generate_subscripts(json_extract(message, '$.parts[*]'), 1) - 1)::VARCHAR AS call_no
    FROM message
    WHERE json_type(message, '$.parts') = 'ARRAY'
),
json_request AS (
    SELECT
        trace_id, span_id, parent_span_id, conversation_attr, start_time, end_time, message_no, call_no,
        json_extract_string(part, '$.name') AS tool,
        json_extract_string(part, '$.id') AS call_id,
        -- An object as its JSON text; a text (arguments as the model wrote them) as itself.
        CASE WHEN json_type(part, '$.arguments') = 'VARCHAR'
             THEN json_extract_string(part, '$.arguments')
             ELSE json_extract(part, '$.arguments')::VARCHAR END AS arguments
    FROM part
    WHERE json_extract_string(part, '$.type') = 'tool_call'
),
request AS (
    SELECT * FROM flat_request
    UNION ALL
    SELECT * FROM json_request
)
SELECT
    trace_id, span_id, parent_span_id, 'requested' AS source, tool, call_id, conversation_attr,
    toolspan_recorded(arguments) AS arguments,
    toolspan_recorded(arguments) AS arguments_value,
    -- When the model asked: the end of the LLM span (its answer). Nothing ran,
    -- so no duration.
    end_time AS start_time, end_time, NULL::DOUBLE AS duration_ms,
    'UNSET' AS status_code
FROM request
WHERE tool IS NOT NULL;

-- name: forget_executed_requests
-- A requested call that a tool span (any other source) of the same trace
-- stands for is that call, counted once: the span with the same call id; or,
-- where the ids do not tell (a tool span without an id, or with one no
-- request names, like Google ADK's '<not specified>'; a request without an
-- id), any tool span of the same tool. The second rule may drop a request
-- that was not run (two requests, one tool span without an id): a call is
-- rather missed than counted twice.
DELETE FROM touched_tool_spans AS r
WHERE r.source = 'requested'
  AND (
    EXISTS (
        SELECT 1 FROM touched_tool_spans AS e
        WHERE e.trace_id = r.trace_id AND e.call_id = r.call_id
          AND e.source NOT IN ('requested', 'attempt'))
    OR EXISTS (
        SELECT 1 FROM touched_tool_spans AS e
        WHERE e.trace_id = r.trace_id AND e.tool = r.tool
          AND e.source NOT IN ('requested', 'attempt')
          AND (r.call_id IS NULL OR e.call_id IS NULL OR NOT EXISTS (
              SELECT 1 FROM touched_tool_spans AS q
              WHERE q.trace_id = e.trace_id AND q.call_id = e.call_id AND q.source = 'requested'))));

-- name: count_touched_tool_spans
-- How many touched tool spans need a fingerprint of their arguments (they
-- carry no toolspan.args.hash) or of their result text (no
-- toolspan.result.hash): the fingerprint is the SHA-256 of the canonical
-- JSON, which the Analyzer computes in Python (toolspan_canonical_json).
-- Registering that function imports numpy into DuckDB (~0.06 CPU s), so it is
-- registered only when a span needs it; toolspan's own spans carry their
-- hashes (a result captured with capture_results comes with its hash). Then
-- how many are weak call spans (forget_dominated_calls runs only if some
-- are), and how many there are in all.
SELECT
    count(*) FILTER (
        WHERE (args_fingerprint IS NULL AND arguments_value IS NOT NULL)
           OR (result_text IS NOT NULL AND result_hash IS NULL)),
    count(*) FILTER (WHERE source IN ('genai', 'openinference', 'vercel', 'langfuse', 'mlflow')),
    count(*)
FROM touched_tool_spans;

-- name: fingerprint_tool_spans
-- A result's fingerprint only where no hash is given: nothing reads it then
-- (tool_calls takes coalesce(result_hash, result_fingerprint)).
UPDATE touched_tool_spans
SET args_fingerprint = coalesce(args_fingerprint, sha256(toolspan_canonical_json(arguments_value))),
    result_fingerprint = CASE WHEN result_hash IS NULL
                              THEN sha256(toolspan_canonical_json(result_text)) END
WHERE (args_fingerprint IS NULL AND arguments_value IS NOT NULL)
   OR (result_text IS NOT NULL AND result_hash IS NULL);

-- name: canonical_requested_arguments
-- A requested call's arguments shown as canonical JSON, as the ClickHouse path
-- shows them: a JSON object's numbers are written by each engine its own way
-- (gen_ai.output.messages, DuckDB 2.0 where ClickHouse writes 2). Before
-- fingerprint_tool_spans, which then has no requested call left to
-- fingerprint: the canonical text is made once (fingerprint_requested_calls).
UPDATE touched_tool_spans
SET arguments = toolspan_canonical_json(arguments_value)
WHERE source = 'requested' AND arguments_value IS NOT NULL;

-- name: fingerprint_requested_calls
UPDATE touched_tool_spans
SET args_fingerprint = sha256(arguments)
WHERE source = 'requested' AND arguments IS NOT NULL;

-- name: scope_old_conversations
-- The conversations and keys of the calls about to be recomputed (findings.sql,
-- toolspan_finding_calls): a call may change conversation (its agent span came
-- later), and the findings of the one it leaves must go too.
INSERT INTO finding_scope_conversations
SELECT DISTINCT conversation_id FROM tool_call_rows
WHERE trace_id IN (SELECT trace_id FROM touched_traces);

-- name: scope_old_keys
INSERT INTO finding_scope_keys
SELECT DISTINCT idempotency_key FROM tool_call_rows
WHERE trace_id IN (SELECT trace_id FROM touched_traces) AND idempotency_key IS NOT NULL;

-- name: scope_new_conversations
-- The same after insert_tool_calls, from the touched tool spans (conversation_id
-- as insert_tool_calls makes it) rather than from every call.
INSERT INTO finding_scope_conversations
SELECT DISTINCT coalesce(c.conversation_attr, tc.conversation_id, c.trace_id)
FROM touched_tool_spans AS c
LEFT JOIN touched_conversations AS tc USING (trace_id)
WHERE c.source <> 'attempt';

-- name: scope_new_keys
INSERT INTO finding_scope_keys
SELECT DISTINCT idempotency_key FROM touched_tool_spans
WHERE source <> 'attempt' AND idempotency_key IS NOT NULL;

-- name: forget_touched_calls
DELETE FROM tool_call_rows WHERE trace_id IN (SELECT trace_id FROM touched_traces);

-- name: forget_touched_attempts
DELETE FROM attempt_rows WHERE trace_id IN (SELECT trace_id FROM touched_traces);

-- name: trace_conversations
-- A trace's conversation, for tool spans that do not carry one themselves:
-- from any span of the trace (the agent span often carries it). Only traces
-- with such a tool span are read (after extract_tool_spans): a conversation
-- found for another trace would never be used, and reading every span of
-- every touched trace for it cost ~0.1 CPU s per 1M spans.
CREATE OR REPLACE TEMP TABLE touched_conversations AS
WITH conversation_span AS (
    SELECT
        trace_id,
        coalesce(
            attribute_vals["gen_ai.conversation.id"],
            attribute_vals["session.id"],
            -- Vercel AI SDK's telemetry metadata (v4: on the ai.generateText span only).
            attribute_vals["ai.telemetry.metadata.sessionId"],
            -- v7 (@ai-sdk/otel) has no metadata: the app's runtimeContext.sessionId,
            -- on the root invoke_agent span only.
            attribute_vals["ai.settings.context.sessionId"]) AS conversation_id
    FROM span_rows
    LEFT JOIN attribute_positions USING (attribute_shape)
    WHERE trace_id IN (SELECT trace_id FROM touched_tool_spans WHERE conversation_attr IS NULL)
      AND span_rows.rowid >= ?  -- as in extract_tool_spans
)
SELECT trace_id, min(conversation_id) AS conversation_id
FROM conversation_span
WHERE conversation_id IS NOT NULL
GROUP BY trace_id;

-- name: insert_tool_calls
-- touched_tool_spans holds the touched traces' spans only: no statement below
-- filters by touched_traces again. Narrow CTEs only: DuckDB materialises a CTE
-- used twice, so a wide one (with the arguments text) would hold every touched
-- tool span in memory.
-- Every call span becomes a call here; forget_dominated_calls then removes
-- those another instrumentation's span stands for too.
INSERT INTO tool_call_rows
WITH attempt_count AS (
    SELECT trace_id, parent_span_id AS span_id, count(*) AS attempts
    FROM touched_tool_spans
    WHERE source = 'attempt'
    GROUP BY ALL
),
call AS (
    SELECT
        c.*,
        coalesce(c.conversation_attr, tc.conversation_id, c.trace_id) AS conversation_id,
        toolspan_side_effect(c.tool, c.side_effect_attr, c.source) AS side_effect,
        -- A requested call: asked for, nothing known to have run (0 attempts).
        coalesce(
            c.status_attr,
            CASE WHEN c.source = 'requested' THEN 'requested'
                 WHEN c.status_code = 'ERROR' OR c.error_code IS NOT NULL THEN 'error'
                 ELSE 'succeeded' END) AS status,
        coalesce(c.attempts_attr, ac.attempts, CASE WHEN c.source IN ('toolspan', 'requested') THEN 0 ELSE 1 END) AS attempts
    FROM touched_tool_spans AS c
    LEFT JOIN touched_conversations AS tc USING (trace_id)
    LEFT JOIN attempt_count AS ac ON ac.trace_id = c.trace_id AND ac.span_id = c.span_id
    WHERE c.source <> 'attempt'
)
SELECT
    trace_id, span_id, parent_span_id, conversation_id, request_id, turn_id, tool, call_id,
    side_effect, idempotency_key, coalesce(replayed, false) AS replayed, args_fingerprint,
    arguments,
    -- The loop answer: the result on success, the error code on failure;
    -- unknown for a requested call ('requested': requests repeat each other).
    CASE
        WHEN status = 'succeeded' THEN coalesce(result_hash, result_fingerprint, 'ok')
        WHEN status = 'requested' THEN 'requested'
        ELSE coalesce(error_code, status_code)
    END AS answer,
    coalesce(result_hash, result_fingerprint) AS result_hash,
    status, error_code, retryable, attempts, total_wait_s, retry_after_s, retry_initiator,
    start_time, end_time, duration_ms, source, side_effect_attr, read_back, resource_key,
    keys_honoured
FROM call;

-- name: forget_dominated_calls
-- The same call seen by two instrumentations (e.g. Pydantic AI's execute_tool
-- span around toolspan's call span) is one logical call: keep the richer span
-- (toolspan > genai > openinference) when the two are parent and child or share
-- the tool-call id. Run only when a touched tool span is weak (genai or
-- openinference, count_touched_tool_spans): with toolspan's spans alone no call
-- is dominated, and finding none cost ~0.08 s per 1M spans inside
-- insert_tool_calls. Three equi-joins rather than one join on an OR, which
-- DuckDB cannot hash. The richness bounds (implied by strong > weak) filter
-- each side before its hash table, and only traces with a weak span can hold
-- a dominated one.
WITH call_key AS (
    SELECT
        trace_id, span_id, parent_span_id, call_id, tool,
        CASE source WHEN 'toolspan' THEN 3 WHEN 'genai' THEN 2 ELSE 1 END AS richness
    FROM touched_tool_spans
    -- Requested calls were matched before (forget_executed_requests).
    WHERE source NOT IN ('attempt', 'requested')
),
weak AS (
    SELECT * FROM call_key WHERE richness < 3
),
strong AS (
    SELECT * FROM call_key
    WHERE richness > 1 AND trace_id IN (SELECT trace_id FROM weak)
),
dominated AS (
    SELECT weak.trace_id, weak.span_id
    FROM weak
    JOIN strong ON strong.trace_id = weak.trace_id AND strong.parent_span_id = weak.span_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
    UNION
    SELECT weak.trace_id, weak.span_id
    FROM weak
    JOIN strong ON strong.trace_id = weak.trace_id AND strong.span_id = weak.parent_span_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
    UNION
    SELECT weak.trace_id, weak.span_id
    FROM weak
    JOIN strong ON strong.trace_id = weak.trace_id AND strong.call_id = weak.call_id
    WHERE strong.richness > weak.richness AND strong.tool IS NOT DISTINCT FROM weak.tool
)
DELETE FROM tool_call_rows AS c
WHERE EXISTS (SELECT 1 FROM dominated AS d WHERE d.trace_id = c.trace_id AND d.span_id = c.span_id);

-- name: insert_attempts
INSERT INTO attempt_rows
SELECT
    a.trace_id, a.span_id, a.parent_span_id AS call_span_id,
    coalesce(a.conversation_attr, tc.conversation_id, a.trace_id) AS conversation_id,
    a.tool, a.attempt, a.outcome, a.delay_s, a.elapsed_wait_s, a.error_type, a.http_status,
    a.status_code, a.start_time, a.end_time, a.duration_ms, a.read_back
FROM touched_tool_spans AS a
LEFT JOIN touched_conversations AS tc USING (trace_id)
WHERE a.source = 'attempt';

-- name: update_side_effects
UPDATE tool_call_rows
SET side_effect = toolspan_side_effect(tool, side_effect_attr, source);

-- name: forget_findings
DELETE FROM finding_rows;

-- name: insert_findings
INSERT INTO finding_rows SELECT * FROM toolspan_findings(3);

-- name: forget_scoped_findings
-- The findings of the conversations and keys in scope, recomputed next.
DELETE FROM finding_rows
WHERE CASE
    WHEN kind = 'idempotency_conflict'
        THEN idempotency_key IN (SELECT idempotency_key FROM finding_scope_keys)
    ELSE conversation_id IN (SELECT conversation_id FROM finding_scope_conversations)
END;

-- name: scope_calls
-- The calls the scoped findings read (findings.sql, finding_scope_calls). By
-- rowid: filtered by conversation in one scan, DuckDB read every column of
-- every call before the filter (5x the time of finding the rows first).
INSERT INTO finding_scope_calls BY NAME
SELECT * EXCLUDE (side_effect_attr) FROM tool_call_rows
WHERE rowid IN (
    SELECT rowid FROM tool_call_rows
    WHERE conversation_id IN (SELECT conversation_id FROM finding_scope_conversations));

-- name: scope_key_calls
INSERT INTO finding_scope_key_calls BY NAME
SELECT * EXCLUDE (side_effect_attr) FROM tool_call_rows
WHERE rowid IN (
    SELECT rowid FROM tool_call_rows
    WHERE idempotency_key IN (SELECT idempotency_key FROM finding_scope_keys));

-- name: insert_scoped_findings
INSERT INTO finding_rows SELECT * FROM toolspan_findings(3, scoped := true);

-- name: forget_finding_scope_conversations
DELETE FROM finding_scope_conversations;

-- name: forget_finding_scope_keys
DELETE FROM finding_scope_keys;

-- name: forget_scope_calls
DELETE FROM finding_scope_calls;

-- name: forget_scope_key_calls
DELETE FROM finding_scope_key_calls;

-- name: forget_pending
DELETE FROM pending_traces;

-- name: forget_pending_batches
DELETE FROM pending_batches;
