-- name: findings_macro
-- Every finding, for a given minimum number of repeats (loops only). One row
-- per finding; detail is JSON text. See docs/analyzer.md for the exact rules.
CREATE OR REPLACE MACRO toolspan_findings(min_repeats) AS TABLE
-- Each rule scans tool_calls itself: a shared CTE would be materialised with
-- every column of every call.
WITH
-- loop: >= min_repeats logical calls in one conversation with the same tool,
-- the same arguments and the same answer. Attempts inside a call are not calls.
-- Groups are counted first, and only the repeated ones collect their lists.
repeated_key AS (
    SELECT conversation_id, tool, args_fingerprint, answer
    FROM tool_calls
    GROUP BY ALL
    HAVING count(*) >= min_repeats
),
loop_group AS (
    SELECT
        conversation_id, tool, args_fingerprint, answer,
        count(*) AS count,
        list(span_id ORDER BY start_time, span_id) AS span_ids,
        list_sort(list(DISTINCT trace_id)) AS trace_ids,
        min(start_time) AS first_seen,
        max(end_time) AS last_seen,
        any_value(arguments) AS arguments,
        -- Every call after the first was wasted: its time in the tool plus its waits.
        sum(duration_ms) - arg_min(duration_ms, start_time) AS wasted_ms,
        sum(coalesce(total_wait_s, 0)) - arg_min(coalesce(total_wait_s, 0), start_time) AS wasted_wait_s,
        sum(attempts) AS attempts
    FROM tool_calls AS c
    SEMI JOIN repeated_key AS k
        ON k.conversation_id = c.conversation_id
       AND k.tool IS NOT DISTINCT FROM c.tool
       AND k.args_fingerprint IS NOT DISTINCT FROM c.args_fingerprint
       AND k.answer IS NOT DISTINCT FROM c.answer
    GROUP BY conversation_id, tool, args_fingerprint, answer
),
loop AS (
    SELECT
        'loop' AS kind, g.conversation_id, g.tool, NULL::VARCHAR AS idempotency_key, g.count,
        g.span_ids, g.trace_ids, g.first_seen, g.last_seen,
        json_object(
            'args_fingerprint', g.args_fingerprint,
            'arguments', g.arguments,
            'answer', g.answer,
            'attempts', g.attempts,
            'wasted_ms', round(g.wasted_ms, 3),
            'wasted_wait_s', round(g.wasted_wait_s, 3),
            -- Other repeated calls of the same conversation over the same time: a cycle.
            'cycle_tools', (
                SELECT list_sort(list(DISTINCT o.tool))
                FROM loop_group AS o
                WHERE o.conversation_id = g.conversation_id
                  AND o.first_seen <= g.last_seen AND g.first_seen <= o.last_seen
            )
        )::VARCHAR AS detail
    FROM loop_group AS g
),
-- duplicate_write: a write that executed successfully more than once for the
-- same logical action (same idempotency key, else same tool and arguments).
duplicate_write AS (
    SELECT
        'duplicate_write' AS kind, conversation_id,
        CASE WHEN count(DISTINCT tool) = 1 THEN min(tool) END AS tool,
        idempotency_key, count(*) AS count,
        list(span_id ORDER BY start_time, span_id) AS span_ids,
        list_sort(list(DISTINCT trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        json_object(
            'tools', list_sort(list(DISTINCT tool)),
            'args_fingerprints', list_sort(list(DISTINCT args_fingerprint)),
            'call_ids', list(call_id ORDER BY start_time, span_id),
            'arguments', any_value(arguments)
        )::VARCHAR AS detail
    FROM tool_calls
    WHERE side_effect = 'write' AND status = 'succeeded' AND NOT replayed
    GROUP BY
        conversation_id, idempotency_key,
        CASE WHEN idempotency_key IS NULL THEN tool END,
        CASE WHEN idempotency_key IS NULL THEN args_fingerprint END
    HAVING count(*) >= 2
),
-- idempotency_conflict: one key used with different argument fingerprints.
idempotency_conflict AS (
    SELECT
        'idempotency_conflict' AS kind,
        arg_min(conversation_id, start_time) AS conversation_id,
        CASE WHEN count(DISTINCT tool) = 1 THEN min(tool) END AS tool,
        idempotency_key, count(*) AS count,
        list(span_id ORDER BY start_time, span_id) AS span_ids,
        list_sort(list(DISTINCT trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        json_object(
            'tools', list_sort(list(DISTINCT tool)),
            'args_fingerprints', list_sort(list(DISTINCT args_fingerprint)),
            'conversations', list_sort(list(DISTINCT conversation_id)),
            'statuses', list(status ORDER BY start_time, span_id)
        )::VARCHAR AS detail
    FROM tool_calls
    WHERE idempotency_key IS NOT NULL
    GROUP BY idempotency_key
    HAVING count(DISTINCT args_fingerprint) > 1
),
-- unsafe_retry: a write without an idempotency key attempted more than once
-- inside one logical call.
unsafe_retry AS (
    SELECT
        'unsafe_retry' AS kind, c.conversation_id, c.tool, NULL::VARCHAR AS idempotency_key,
        c.attempts AS count,
        [c.span_id] AS span_ids, [c.trace_id] AS trace_ids,
        c.start_time AS first_seen, c.end_time AS last_seen,
        json_object(
            'call_id', c.call_id,
            'status', c.status,
            'error_code', c.error_code,
            'arguments', c.arguments,
            'attempt_outcomes', (
                SELECT list(a.outcome ORDER BY a.attempt)
                FROM attempts AS a
                WHERE a.trace_id = c.trace_id AND a.call_span_id = c.span_id
            )
        )::VARCHAR AS detail
    FROM tool_calls AS c
    WHERE c.side_effect = 'write' AND c.idempotency_key IS NULL AND c.attempts > 1
      -- A repeat is safe only when the tool's read-back showed the effect absent
      -- after the attempt before it (toolspan.read_back = 'absent').
      AND EXISTS (
          SELECT 1
          FROM attempt_rows AS a
          WHERE a.trace_id = c.trace_id AND a.call_span_id = c.span_id
            AND a.attempt < c.attempts
            AND coalesce(a.read_back, '') <> 'absent')
)
SELECT * FROM loop
UNION ALL SELECT * FROM duplicate_write
UNION ALL SELECT * FROM idempotency_conflict
UNION ALL SELECT * FROM unsafe_retry;

-- name: findings_view
-- Materialised after each ingest and set_write_tools (derive.sql).
CREATE OR REPLACE VIEW findings AS
SELECT * FROM finding_rows
ORDER BY kind, first_seen, conversation_id, tool;
