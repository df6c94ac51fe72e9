-- name: trace_spans
-- Trace view (trace_spans.sql on ClickHouse): the waterfall of one trace, or
-- of one request or turn in it, in depth-first order (children under their
-- parent, siblings by start time). A request or turn shows its tool calls with
-- everything under them, the spans above them, and the model and agent spans
-- since the previous tool call of the trace ended.
WITH RECURSIVE
-- The trace's spans, its calls and its attempts' ids are each read once, as the
-- value of a scalar subquery (computed once per query): a CTE is read again at
-- every reference, the recursion's levels included (0.27-0.32 -> 0.11-0.15 s a
-- trace on 10M spans in chDB).
(
    SELECT groupArray((span_id, parent_span_id, name, start_time, end_time, duration_ms,
        status_code, status_message, operation))
    FROM ($spans_of_trace)
) AS trace_span_rows,
(
    SELECT groupArray((span_id, start_time, end_time, request_id, turn_id))
    FROM tool_calls
    WHERE trace_id = {trace_id:String}
) AS trace_call_rows,
(SELECT groupArray(span_id) FROM attempts WHERE trace_id = {trace_id:String}) AS attempt_ids,
trace_spans AS (
    SELECT r.1 AS span_id, r.2 AS parent_span_id, r.3 AS name, r.4 AS start_time,
        r.5 AS end_time, r.6 AS duration_ms, r.7 AS status_code, r.8 AS status_message,
        r.9 AS operation
    FROM (SELECT arrayJoin(trace_span_rows) AS r)
),
tree AS (
    SELECT
        span_id,
        toUInt32(0) AS depth,
        [span_id] AS ids,
        [concat(leftPad(toString(toUnixTimestamp64Micro(start_time)), 20, '0'), span_id)] AS sort_path
    FROM trace_spans
    WHERE parent_span_id IS NULL
        OR parent_span_id NOT IN (SELECT span_id FROM trace_spans)
    UNION ALL
    SELECT
        s.span_id AS span_id,
        t.depth + 1 AS depth,
        arrayPushBack(t.ids, s.span_id) AS ids,
        arrayPushBack(t.sort_path,
            concat(leftPad(toString(toUnixTimestamp64Micro(s.start_time)), 20, '0'), s.span_id))
            AS sort_path
    FROM tree AS t
    INNER JOIN trace_spans AS s ON s.parent_span_id = t.span_id
    WHERE t.depth < 64
),
trace_calls AS (
    SELECT r.1 AS span_id, r.2 AS start_time, r.3 AS end_time, r.4 AS request_id, r.5 AS turn_id
    FROM (SELECT arrayJoin(trace_call_rows) AS r)
),
scope_calls AS (
    SELECT span_id, start_time, end_time
    FROM trace_calls
    WHERE ({scope:String} = 'request' AND request_id = {scope_id:String})
        OR ({scope:String} = 'turn' AND turn_id = {scope_id:String})
),
scope_window AS (
    SELECT
        (SELECT groupArray(span_id) FROM scope_calls) AS call_ids,
        (
            SELECT arrayFlatten(groupArray(ids))
            FROM tree
            WHERE span_id IN (SELECT span_id FROM scope_calls)
        ) AS ancestor_ids,
        (
            SELECT coalesce(maxOrNull(end_time), (SELECT minOrNull(start_time) FROM trace_spans))
            FROM trace_calls
            WHERE end_time <= (SELECT minOrNull(start_time) FROM scope_calls)
                AND span_id NOT IN (SELECT span_id FROM scope_calls)
        ) AS lead_in_start,
        (SELECT maxOrNull(end_time) FROM scope_calls) AS window_end
),
labelled AS (
    SELECT
        s.span_id AS span_id, s.parent_span_id AS parent_span_id, s.name AS name,
        s.start_time AS start_time, s.end_time AS end_time, s.duration_ms AS duration_ms,
        s.status_code AS status_code, s.status_message AS status_message,
        t.depth AS depth,
        t.ids AS ids,
        t.sort_path AS sort_path,
        multiIf(
            s.span_id IN (SELECT span_id FROM trace_calls), 'tool',
            has(attempt_ids, s.span_id), 'attempt',
            s.operation IN ('chat', 'text_completion', 'generate_content'), 'model',
            match(lower(s.name), '^(chat|text_completion|generate_content|llm)\\b'), 'model',
            -- The SDKs' own spans: anthropic.messages.create, openai.chat ...
            match(lower(s.name), '^(anthropic|openai)\\.(messages|chat|completions)\\b'), 'model',
            match(lower(s.name), '^(invoke_agent|create_agent|agent)\\b'), 'agent',
            'other') AS category
    FROM tree AS t
    INNER JOIN trace_spans AS s ON s.span_id = t.span_id
),
selected AS (
    SELECT l.*
    FROM labelled AS l
    CROSS JOIN scope_window AS w
    WHERE {scope:String} = 'trace'
        OR hasAny(l.ids, w.call_ids)
        OR has(w.ancestor_ids, l.span_id)
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
    (toUnixTimestamp64Micro(start_time) - toUnixTimestamp64Micro(min(start_time) OVER ())) / 1000.0
        AS start_ms,
    (toUnixTimestamp64Micro(end_time) - toUnixTimestamp64Micro(min(start_time) OVER ())) / 1000.0
        AS end_ms,
    count() OVER () AS total_spans
FROM selected
ORDER BY sort_path
LIMIT {max_spans:UInt64}
