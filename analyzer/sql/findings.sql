-- name: finding_scope_calls
-- The calls of the conversations in finding_scope_conversations, copied there
-- by a scoped refresh (derive.sql, scope_calls) and emptied after it. Every
-- finding but idempotency_conflict depends on the calls of one conversation
-- only, so a live ingest recomputes the findings of the conversations it
-- touched, not every finding: that refresh cost grew with the database, 0.36 s
-- per batch at 500,000 spans. Copied once per refresh, not read in place: each
-- rule scans the calls again, and each such scan filtered by conversation cost
-- about as much as the unscoped rule.
CREATE TABLE IF NOT EXISTS finding_scope_calls AS SELECT * FROM tool_calls LIMIT 0;

-- name: finding_scope_key_calls
-- The same for idempotency_conflict, which groups the calls of one key across
-- conversations: the calls of the keys in finding_scope_keys.
CREATE TABLE IF NOT EXISTS finding_scope_key_calls AS SELECT * FROM tool_calls LIMIT 0;

-- name: finding_calls_macro
-- The calls the findings are computed over: every call, or (scoped) the copy
-- above. Unscoped, the second branch is a constant false that DuckDB drops.
CREATE OR REPLACE MACRO toolspan_finding_calls(scoped) AS TABLE
SELECT * FROM tool_calls WHERE NOT scoped
UNION ALL
SELECT * FROM finding_scope_calls WHERE scoped;

-- name: key_calls_macro
CREATE OR REPLACE MACRO toolspan_key_calls(scoped) AS TABLE
SELECT * FROM tool_calls WHERE NOT scoped
UNION ALL
SELECT * FROM finding_scope_key_calls WHERE scoped;

-- name: unknown_outcome_macro
-- Whether a failed write may have happened anyway: toolspan's codes, and, from
-- other instrumentations (which never write toolspan's codes), an exception
-- or error type naming a timeout or a lost connection (TimeoutError,
-- ReadTimeout, ConnectionResetError, ...). A refused connection sent nothing.
CREATE OR REPLACE MACRO toolspan_unknown_outcome(error_code, source) AS
    error_code IN ('unknown_outcome', 'timeout', 'connection_error')
    OR (source <> 'toolspan'
        AND regexp_matches(error_code, '(?i)time[_ .-]?out|timed[_ .-]?out|connection')
        AND NOT regexp_matches(error_code, '(?i)refused'));

-- name: findings_macro
-- Every finding, for a given minimum number of repeats (loops only). One row
-- per finding; detail is JSON text. See docs/analyzer.md for the exact rules.
-- scoped: only the findings of the conversations and keys in scope (above).
CREATE OR REPLACE MACRO toolspan_findings(min_repeats, scoped := false) AS TABLE
-- Each rule scans tool_calls itself: a shared CTE would be materialised with
-- every column of every call.
WITH
-- loop: >= min_repeats logical calls in one conversation with the same tool,
-- the same arguments and the same answer. Attempts inside a call are not calls.
-- Groups are counted first, and only the repeated ones collect their lists.
-- A call whose arguments were not recorded (no fingerprint) repeats nothing:
-- unknown never equals unknown (summary.sql counts such calls as unverifiable).
repeated_key AS (
    SELECT conversation_id, tool, args_fingerprint, answer
    FROM toolspan_finding_calls(scoped)
    WHERE args_fingerprint IS NOT NULL
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
        -- The first call's (by start, then span id; its first with any).
        arg_min(arguments, (start_time, span_id)) AS arguments,
        -- Every call after the first was wasted: its time in the tool plus its waits.
        sum(duration_ms) - arg_min(duration_ms, (start_time, span_id)) AS wasted_ms,
        sum(coalesce(total_wait_s, 0)) - arg_min(coalesce(total_wait_s, 0), (start_time, span_id)) AS wasted_wait_s,
        sum(attempts) AS attempts,
        -- A replayed keyed write ran nothing: asked, not executed.
        count(*) FILTER (WHERE replayed) AS replays,
        -- Calls known only from the model's request (source 'requested'): whether
        -- they ran is unknown. Their answer ('requested') groups them apart.
        count(*) FILTER (WHERE source = 'requested') AS requested
    FROM toolspan_finding_calls(scoped) AS c
    SEMI JOIN repeated_key AS k
        ON k.conversation_id = c.conversation_id
       AND k.tool IS NOT DISTINCT FROM c.tool
       AND k.args_fingerprint = c.args_fingerprint
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
            'executions', g.count - g.replays - g.requested,
            'replays', g.replays,
            'requested', g.requested,
            'wasted_ms', round(g.wasted_ms, 3),
            'wasted_wait_s', round(g.wasted_wait_s, 3),
            'explanation', CASE
                WHEN g.requested > 0 THEN format(
                    'The model requested {} {} times with the same arguments (no tool span '
                    || 'was recorded, so whether each ran and what it answered is unknown): '
                    || 'give the model the first answer instead of letting it ask again (or '
                    || 'block the repeat).',
                    coalesce(g.tool, '?'), g.count)
                ELSE format(
                    '{} {} with the same arguments and got the same answer each time: '
                    || 'give the model that answer instead of letting it ask again (or block the repeat).',
                    coalesce(g.tool, '?'),
                    CASE WHEN g.replays = 0 THEN format('ran {} times', g.count)
                         ELSE format('was asked {} times (ran {}, replayed {})',
                                     g.count, g.count - g.replays, g.replays) END)
            END,
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
-- A requested call (status 'requested') executed nothing known: never evidence.
-- Like loops, the repeated actions are found first, on narrow rows: a list
-- with ORDER BY is an ordered aggregate, which buffers every row of its group
-- in memory, and over every write of a 10M-span corpus that did not fit 512MB.
duplicate_key AS (
    SELECT
        conversation_id, idempotency_key,
        CASE WHEN idempotency_key IS NULL THEN tool END AS action_tool,
        CASE WHEN idempotency_key IS NULL THEN args_fingerprint END AS action_args
    FROM toolspan_finding_calls(scoped)
    WHERE side_effect = 'write' AND status = 'succeeded' AND NOT replayed
      -- Without a key, the action is its arguments: unrecorded ones name none.
      AND (idempotency_key IS NOT NULL OR args_fingerprint IS NOT NULL)
    GROUP BY ALL
    HAVING count(*) >= 2
),
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
            'arguments', arg_min(arguments, (start_time, span_id)),
            'explanation', format(
                '{} writes of {} for one action all ran: {}.',
                count(*), array_to_string(list_sort(list(DISTINCT tool)), ', '),
                CASE
                    WHEN idempotency_key IS NULL THEN 'give the action one idempotency key so '
                        || 'that a repeat returns the stored result instead of writing again'
                    ELSE 'its idempotency key did not stop the repeat, so make every worker '
                        || 'use the same shared idempotency store'
                END)
        )::VARCHAR AS detail
    FROM toolspan_finding_calls(scoped) AS c
    SEMI JOIN duplicate_key AS k
        ON k.conversation_id = c.conversation_id
       AND k.idempotency_key IS NOT DISTINCT FROM c.idempotency_key
       AND k.action_tool IS NOT DISTINCT FROM CASE WHEN c.idempotency_key IS NULL THEN c.tool END
       AND k.action_args IS NOT DISTINCT FROM
           CASE WHEN c.idempotency_key IS NULL THEN c.args_fingerprint END
    WHERE side_effect = 'write' AND status = 'succeeded' AND NOT replayed
    GROUP BY
        conversation_id, idempotency_key,
        CASE WHEN idempotency_key IS NULL THEN tool END,
        CASE WHEN idempotency_key IS NULL THEN args_fingerprint END
),
-- idempotency_conflict: one key used with different argument fingerprints.
idempotency_conflict AS (
    SELECT
        'idempotency_conflict' AS kind,
        arg_min(conversation_id, (start_time, span_id)) AS conversation_id,
        CASE WHEN count(DISTINCT tool) = 1 THEN min(tool) END AS tool,
        idempotency_key, count(*) AS count,
        list(span_id ORDER BY start_time, span_id) AS span_ids,
        list_sort(list(DISTINCT trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        json_object(
            'tools', list_sort(list(DISTINCT tool)),
            'args_fingerprints', list_sort(list(DISTINCT args_fingerprint)),
            'conversations', list_sort(list(DISTINCT conversation_id)),
            'statuses', list(status ORDER BY start_time, span_id),
            'explanation', format(
                'Idempotency key {} was used for {} different argument sets: derive the key from '
                || 'the action it protects, so different actions never share one.',
                idempotency_key, count(DISTINCT args_fingerprint))
        )::VARCHAR AS detail
    FROM toolspan_key_calls(scoped)
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
            ),
            'explanation', format(
                'A write of {} without an idempotency key was attempted {} times: give it a key '
                || '(or a read-back that checks the effect) before letting it be retried.',
                coalesce(c.tool, '?'), c.attempts)
        )::VARCHAR AS detail
    FROM toolspan_finding_calls(scoped) AS c
    WHERE c.side_effect = 'write' AND c.idempotency_key IS NULL AND c.attempts > 1
      -- A repeat is safe only when the tool's read-back showed the effect absent
      -- after the attempt before it (toolspan.read_back = 'absent').
      AND EXISTS (
          SELECT 1
          FROM attempt_rows AS a
          WHERE a.trace_id = c.trace_id AND a.call_span_id = c.span_id
            AND a.attempt < c.attempts
            AND coalesce(a.read_back, '') <> 'absent')
),
-- unverified_keyed_retry: a keyed write ran again after a failure that left its
-- outcome unknown, and only the service's honouring of the key stood between
-- that run and a second effect: nothing read the effect back and the tool is
-- not declared keys_honoured=True (toolspan.tool.keys_honoured). Either an
-- attempt after an ambiguous attempt (a failure the write may have committed
-- through: AMBIGUOUS_CODES, tracer/_policy.py) with no read-back after it, or
-- a call that ran on a key whose earlier run ended unknown
-- (toolspan.read_back = 'required', no read-back answered). A service that
-- ignores keys wrote twice there, while every span says succeeded.
unverified_keyed_retry AS (
    SELECT
        'unverified_keyed_retry' AS kind, c.conversation_id, c.tool, c.idempotency_key,
        c.attempts AS count,
        [c.span_id] AS span_ids, [c.trace_id] AS trace_ids,
        c.start_time AS first_seen, c.end_time AS last_seen,
        json_object(
            'call_id', c.call_id,
            'status', c.status,
            'keys_honoured', c.keys_honoured,
            'attempt_outcomes', coalesce((
                SELECT list(a.outcome ORDER BY a.attempt)
                FROM attempt_rows AS a
                WHERE a.trace_id = c.trace_id AND a.call_span_id = c.span_id
            ), []::VARCHAR[]),
            'explanation', format(
                '{} ran again under idempotency key {} after a failure that may have committed '
                || 'it, and nothing checked the effect: if the service ignores the key, the write '
                || 'ran twice. Give the tool a read_back, or check that the service honours keys '
                || '(toolspan.tracer.testing.check_keys_honoured) and declare keys_honoured=True.',
                coalesce(c.tool, '?'), c.idempotency_key)
        )::VARCHAR AS detail
    FROM toolspan_finding_calls(scoped) AS c
    WHERE c.side_effect = 'write' AND c.idempotency_key IS NOT NULL AND NOT c.replayed
      AND c.keys_honoured IS DISTINCT FROM 'true'
      AND (
          (c.read_back = 'required' AND c.attempts >= 1)
          OR EXISTS (
              SELECT 1
              FROM attempt_rows AS a
              WHERE a.trace_id = c.trace_id AND a.call_span_id = c.span_id
                AND a.attempt < c.attempts
                AND a.outcome IN (
                    'timeout', 'connection_error', 'http_500', 'http_502', 'http_503', 'http_504')
                -- No read-back after it, or one that failed: the retry leaned on the key.
                AND coalesce(a.read_back, 'failed') = 'failed'))
),
-- key_churn: the same write (one conversation, one request, same tool and
-- arguments) succeeded under two or more different idempotency keys: a key
-- minted per attempt, which no store can dedupe. Groups with two keys are
-- found on the keyed calls first; then every call of those groups is listed.
churned_key AS (
    SELECT conversation_id, request_id, tool, args_fingerprint
    FROM toolspan_finding_calls(scoped)
    WHERE side_effect = 'write' AND status = 'succeeded' AND NOT replayed
      AND idempotency_key IS NOT NULL
    GROUP BY ALL
    HAVING count(DISTINCT idempotency_key) >= 2
),
key_churn AS (
    SELECT
        'key_churn' AS kind, c.conversation_id, c.tool, NULL::VARCHAR AS idempotency_key,
        count(*) AS count,
        list(c.span_id ORDER BY c.start_time, c.span_id) AS span_ids,
        list_sort(list(DISTINCT c.trace_id)) AS trace_ids,
        min(c.start_time) AS first_seen, max(c.end_time) AS last_seen,
        json_object(
            'keys', list_sort(list(DISTINCT c.idempotency_key) FILTER (WHERE c.idempotency_key IS NOT NULL)),
            'request_id', c.request_id,
            'args_fingerprint', c.args_fingerprint,
            'arguments', arg_min(c.arguments, (c.start_time, c.span_id)),
            'explanation', format(
                '{} writes of {} with the same arguments ran under {} different idempotency keys: '
                || 'derive the key once per logical action and reuse it on every retry.',
                count(*), coalesce(c.tool, '?'), count(DISTINCT c.idempotency_key))
        )::VARCHAR AS detail
    FROM toolspan_finding_calls(scoped) AS c
    SEMI JOIN churned_key AS k
        ON k.conversation_id = c.conversation_id
       AND k.request_id IS NOT DISTINCT FROM c.request_id
       AND k.tool IS NOT DISTINCT FROM c.tool
       AND k.args_fingerprint IS NOT DISTINCT FROM c.args_fingerprint
    WHERE c.side_effect = 'write' AND c.status = 'succeeded' AND NOT c.replayed
    GROUP BY c.conversation_id, c.request_id, c.tool, c.args_fingerprint
),
-- write_after_unknown: a write whose outcome was unknown (it may have
-- happened) run again later with the same arguments, and nothing read the
-- effect back first (the repeat's toolspan.read_back is absent).
unknown_write AS (
    SELECT trace_id, span_id, conversation_id, tool, args_fingerprint, idempotency_key,
           error_code, arguments, start_time, end_time
    FROM toolspan_finding_calls(scoped)
    WHERE side_effect = 'write' AND args_fingerprint IS NOT NULL
      AND toolspan_unknown_outcome(error_code, source)
),
unread_repeat AS (
    SELECT
        u.trace_id AS unknown_trace_id, u.span_id AS unknown_span_id,
        r.trace_id, r.span_id, r.start_time, r.end_time
    FROM unknown_write AS u
    JOIN toolspan_finding_calls(scoped) AS r
        ON r.conversation_id = u.conversation_id
       AND r.tool IS NOT DISTINCT FROM u.tool
       AND r.args_fingerprint = u.args_fingerprint
       AND r.start_time >= u.end_time
    -- attempts >= 1: a requested call (0 attempts) ran nothing, so it repeats no write.
    WHERE r.attempts >= 1 AND NOT r.replayed AND r.read_back IS NULL
      AND NOT (r.trace_id = u.trace_id AND r.span_id = u.span_id)
),
repeat_group AS (
    SELECT
        unknown_trace_id, unknown_span_id, count(*) AS repeats,
        list(span_id ORDER BY start_time, span_id) AS span_ids,
        list(DISTINCT trace_id) AS trace_ids,
        max(end_time) AS last_end
    FROM unread_repeat
    GROUP BY ALL
),
write_after_unknown AS (
    SELECT
        'write_after_unknown' AS kind, u.conversation_id, u.tool, u.idempotency_key,
        1 + r.repeats AS count,
        [u.span_id] || r.span_ids AS span_ids,
        list_sort(list_distinct([u.trace_id] || r.trace_ids)) AS trace_ids,
        u.start_time AS first_seen, greatest(u.end_time, r.last_end) AS last_seen,
        json_object(
            'error_code', u.error_code,
            'args_fingerprint', u.args_fingerprint,
            'arguments', u.arguments,
            'repeats', r.repeats,
            'explanation', format(
                'A write of {} ended with {} (it may have happened) and ran again {} without '
                || 'reading its effect back: check the effect with a read-back, or reuse the '
                || 'idempotency key, before repeating it.',
                coalesce(u.tool, '?'), u.error_code,
                CASE r.repeats WHEN 1 THEN 'once' ELSE r.repeats || ' times' END)
        )::VARCHAR AS detail
    FROM unknown_write AS u
    JOIN repeat_group AS r ON r.unknown_trace_id = u.trace_id AND r.unknown_span_id = u.span_id
),
-- retried_permanent: an attempt that failed with a code waiting cannot fix
-- (a 4xx other than 408/409/429, invalid arguments) was followed by another
-- attempt of the same call.
permanent_attempt AS (
    SELECT
        a.trace_id, a.call_span_id,
        min(a.attempt) AS attempt, arg_min(a.outcome, a.attempt) AS outcome
    FROM attempt_rows AS a
    WHERE a.outcome IN (
        'http_400', 'http_401', 'http_403', 'http_404', 'http_405', 'http_422', 'invalid_arguments')
      AND EXISTS (
          SELECT 1 FROM attempt_rows AS later
          WHERE later.trace_id = a.trace_id AND later.call_span_id = a.call_span_id
            AND later.attempt > a.attempt)
    GROUP BY ALL
),
retried_permanent AS (
    SELECT
        'retried_permanent' AS kind, c.conversation_id, c.tool, c.idempotency_key,
        c.attempts AS count,
        [c.span_id] AS span_ids, [c.trace_id] AS trace_ids,
        c.start_time AS first_seen, c.end_time AS last_seen,
        json_object(
            'call_id', c.call_id,
            'status', c.status,
            'attempt_outcomes', o.outcomes,
            'explanation', format(
                '{} was attempted {} times although attempt {} failed with {}, which waiting '
                || 'cannot fix: do not retry that code; fix the call (arguments, permissions, '
                || 'target) instead.',
                coalesce(c.tool, '?'), c.attempts, p.attempt, p.outcome)
        )::VARCHAR AS detail
    FROM toolspan_finding_calls(scoped) AS c
    JOIN permanent_attempt AS p ON p.trace_id = c.trace_id AND p.call_span_id = c.span_id
    JOIN (
        SELECT trace_id, call_span_id, list(outcome ORDER BY attempt) AS outcomes
        FROM attempt_rows AS a
        SEMI JOIN permanent_attempt AS p
            ON p.trace_id = a.trace_id AND p.call_span_id = a.call_span_id
        GROUP BY ALL
    ) AS o ON o.trace_id = c.trace_id AND o.call_span_id = c.span_id
    WHERE c.attempts >= 2
),
-- parallel_write: writes on one resource (toolspan.resource.key) whose time
-- ranges overlap in one conversation: they race.
resource_write AS (
    SELECT trace_id, span_id, conversation_id, resource_key, tool, start_time, end_time
    FROM toolspan_finding_calls(scoped)
    WHERE side_effect = 'write' AND attempts >= 1 AND resource_key IS NOT NULL
),
overlapping_write AS (
    SELECT DISTINCT a.*
    FROM resource_write AS a
    JOIN resource_write AS b
        ON b.conversation_id = a.conversation_id
       AND b.resource_key = a.resource_key
       AND a.start_time < b.end_time
       AND b.start_time < a.end_time
    WHERE NOT (a.trace_id = b.trace_id AND a.span_id = b.span_id)
),
parallel_write AS (
    SELECT
        'parallel_write' AS kind, conversation_id,
        CASE WHEN count(DISTINCT tool) = 1 THEN min(tool) END AS tool,
        NULL::VARCHAR AS idempotency_key, count(*) AS count,
        list(span_id ORDER BY start_time, span_id) AS span_ids,
        list_sort(list(DISTINCT trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        json_object(
            'resource_key', resource_key,
            'tools', list_sort(list(DISTINCT tool)),
            'explanation', format(
                '{} writes on resource {} ({}) ran at the same time: run writes on one resource '
                || 'one after another (declare resource_key so the executor serialises them).',
                count(*), resource_key, array_to_string(list_sort(list(DISTINCT tool)), ', '))
        )::VARCHAR AS detail
    FROM overlapping_write
    GROUP BY conversation_id, resource_key
)
SELECT * FROM loop
UNION ALL SELECT * FROM duplicate_write
UNION ALL SELECT * FROM idempotency_conflict
UNION ALL SELECT * FROM unsafe_retry
UNION ALL SELECT * FROM unverified_keyed_retry
UNION ALL SELECT * FROM key_churn
UNION ALL SELECT * FROM write_after_unknown
UNION ALL SELECT * FROM retried_permanent
UNION ALL SELECT * FROM parallel_write;

-- name: findings_view
-- Materialised after each ingest and set_write_tools (derive.sql).
CREATE OR REPLACE VIEW findings AS
SELECT * FROM finding_rows
ORDER BY kind, first_seen, conversation_id, tool;
