-- name: trace_spans
-- Trace view: the waterfall of one trace, or of one request or turn in it.
-- Spans come in depth-first order (children under their parent, siblings by
-- start time). A request or turn shows its tool calls with everything under
-- them, the spans above them, and the model and agent spans since the
-- previous tool call of the trace ended (the work that led to these calls).
WITH RECURSIVE
trace_spans AS (
    SELECT span_id, parent_span_id, name, start_time, end_time, duration_ms,
        status_code, status_message,
        -- The waterfall's model kind: SDK spans say what they are here, not in the name.
        lower(attributes['gen_ai.operation.name']) AS operation
    FROM spans
    WHERE trace_id = $trace_id
),
tree AS (
    SELECT
        span_id,
        0 AS depth,
        [span_id] AS ids,
        [lpad(epoch_us(start_time)::VARCHAR, 20, '0') || span_id] AS sort_path
    FROM trace_spans
    WHERE parent_span_id IS NULL
        OR parent_span_id NOT IN (SELECT span_id FROM trace_spans)
    UNION ALL
    SELECT
        s.span_id,
        t.depth + 1,
        list_append(t.ids, s.span_id),
        list_append(t.sort_path, lpad(epoch_us(s.start_time)::VARCHAR, 20, '0') || s.span_id)
    FROM tree AS t
    JOIN trace_spans AS s ON s.parent_span_id = t.span_id
    WHERE t.depth < 64
),
trace_calls AS (
    SELECT span_id, start_time, end_time, request_id, turn_id
    FROM tool_calls
    WHERE trace_id = $trace_id
),
trace_attempts AS (
    SELECT span_id FROM attempts WHERE trace_id = $trace_id
),
scope_calls AS (
    SELECT span_id, start_time, end_time
    FROM trace_calls
    WHERE ($scope = 'request' AND request_id = $scope_id)
        OR ($scope = 'turn' AND turn_id = $scope_id)
),
scope_window AS (
    SELECT
        (SELECT list(span_id) FROM scope_calls) AS call_ids,
        (
            SELECT flatten(list(t.ids))
            FROM tree AS t
            WHERE t.span_id IN (SELECT span_id FROM scope_calls)
        ) AS ancestor_ids,
        (
            SELECT coalesce(max(c.end_time), (SELECT min(start_time) FROM trace_spans))
            FROM trace_calls AS c
            WHERE c.end_time <= (SELECT min(start_time) FROM scope_calls)
                AND c.span_id NOT IN (SELECT span_id FROM scope_calls)
        ) AS lead_in_start,
        (SELECT max(end_time) FROM scope_calls) AS window_end
),
labelled AS (
    SELECT
        s.*,
        t.depth,
        t.ids,
        t.sort_path,
        CASE
            WHEN s.span_id IN (SELECT span_id FROM trace_calls) THEN 'tool'
            WHEN s.span_id IN (SELECT span_id FROM trace_attempts) THEN 'attempt'
            WHEN s.operation IN ('chat', 'text_completion', 'generate_content') THEN 'model'
            WHEN regexp_matches(lower(s.name), '^(chat|text_completion|generate_content|llm)\b')
                THEN 'model'
            -- The SDKs' own spans: anthropic.messages.create, openai.chat ...
            WHEN regexp_matches(lower(s.name), '^(anthropic|openai)\.(messages|chat|completions)\b')
                THEN 'model'
            WHEN regexp_matches(lower(s.name), '^(invoke_agent|create_agent|agent)\b') THEN 'agent'
            ELSE 'other'
        END AS category
    FROM tree AS t
    JOIN trace_spans AS s USING (span_id)
),
selected AS (
    SELECT l.*
    FROM labelled AS l, scope_window AS w
    WHERE $scope = 'trace'
        OR list_has_any(l.ids, w.call_ids)
        OR list_contains(w.ancestor_ids, l.span_id)
        OR (
            l.category IN ('model', 'agent', 'other')
            AND l.start_time >= w.lead_in_start
            AND l.end_time <= w.window_end
        )
)
SELECT
    span_id,
    parent_span_id,
    name,
    category,
    depth,
    status_code,
    status_message,
    duration_ms,
    start_time,
    date_diff('microsecond', min(start_time) OVER (), start_time) / 1000.0 AS start_ms,
    date_diff('microsecond', min(start_time) OVER (), end_time) / 1000.0 AS end_ms,
    count(*) OVER () AS total_spans
FROM selected
ORDER BY sort_path
LIMIT $max_spans;
