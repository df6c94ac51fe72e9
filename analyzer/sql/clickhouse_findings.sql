-- ClickHouse: every finding, with the rules of findings.sql (docs/analyzer.md),
-- over tool_calls and _toolspan_attempt_rows. One row per finding; detail is
-- JSON text (a named tuple through toJSONString), explanation included, in
-- the DuckDB path's words. $min_repeats is the loop threshold. Lists are
-- ordered as DuckDB's list(... ORDER BY start_time, span_id): groupArray of
-- (start_time, span_id, value) tuples, sorted. Run with the analyzer's
-- settings (_clickhouse.py: join_use_nulls, transform_null_in, ...).

-- name: findings
WITH
-- loop: >= min_repeats logical calls in one conversation with the same tool,
-- the same arguments and the same answer. Attempts inside a call are not calls.
-- Groups are counted first, and only the repeated ones collect their lists.
-- A call whose arguments were not recorded repeats nothing (findings.sql).
repeated_key AS (
    SELECT conversation_id, tool, args_fingerprint, answer
    FROM tool_calls
    WHERE args_fingerprint IS NOT NULL
    GROUP BY conversation_id, tool, args_fingerprint, answer
    HAVING count() >= $min_repeats
),
loop_group AS (
    SELECT
        conversation_id, tool, args_fingerprint, answer,
        count() AS count,
        arrayMap(x -> x.2, arraySort(groupArray((start_time, span_id)))) AS span_ids,
        arraySort(groupUniqArray(trace_id)) AS trace_ids,
        min(start_time) AS first_seen,
        max(end_time) AS last_seen,
        -- The first call's (by start, then span id; its first with any), as DuckDB.
        argMin(arguments, (start_time, span_id)) AS arguments,
        -- Every call after the first was wasted: its time in the tool plus its waits.
        sum(duration_ms) - argMin(duration_ms, (start_time, span_id)) AS wasted_ms,
        sum(coalesce(total_wait_s, 0)) - argMin(coalesce(total_wait_s, 0), (start_time, span_id)) AS wasted_wait_s,
        sum(attempts) AS attempts,
        -- A replayed keyed write ran nothing: asked, not executed.
        countIf(replayed) AS replays,
        -- Calls known only from the model's request (findings.sql).
        countIf(source = 'requested') AS requested
    FROM tool_calls
    WHERE (conversation_id, tool, args_fingerprint, answer) IN (SELECT * FROM repeated_key)
    GROUP BY conversation_id, tool, args_fingerprint, answer
),
loop AS (
    SELECT
        'loop' AS kind, conversation_id, tool, CAST(NULL, 'Nullable(String)') AS idempotency_key,
        count, span_ids, trace_ids, first_seen, last_seen,
        toJSONString(CAST(
            (args_fingerprint, arguments, answer, attempts, count - replays - requested, replays,
             requested, round(wasted_ms, 3), round(wasted_wait_s, 3),
             if(requested > 0,
                format(
                    'The model requested {} {} times with the same arguments (no tool span '
                    || 'was recorded, so whether each ran and what it answered is unknown): '
                    || 'give the model the first answer instead of letting it ask again (or '
                    || 'block the repeat).',
                    coalesce(tool, '?'), toString(count)),
                format(
                    '{} {} with the same arguments and got the same answer each time: '
                    || 'give the model that answer instead of letting it ask again (or block the repeat).',
                    coalesce(tool, '?'),
                    if(replays = 0, format('ran {} times', toString(count)),
                       format('was asked {} times (ran {}, replayed {})',
                              toString(count), toString(count - replays), toString(replays))))),
             -- Other repeated calls of the same conversation over the same time: a cycle.
             arraySort(arrayDistinct(arrayMap(o -> o.1, arrayFilter(
                 o -> o.2 <= last_seen AND first_seen <= o.3,
                 groupArray((tool, first_seen, last_seen)) OVER (PARTITION BY conversation_id)))))),
            'Tuple(args_fingerprint Nullable(String), arguments Nullable(String), answer Nullable(String),
                   attempts Int64, executions Int64, replays Int64, requested Int64,
                   wasted_ms Nullable(Float64),
                   wasted_wait_s Float64, explanation String,
                   cycle_tools Array(Nullable(String)))')) AS detail
    FROM loop_group
),
-- duplicate_write: a write that executed successfully more than once for the
-- same logical action (same idempotency key, else same tool and arguments).
-- The repeated actions first, as for loops: most writes run once, and
-- collecting their lists took most of this rule's time (10M spans: 1.45 s,
-- 0.60 s this way).
-- An action: its key, else its tool and arguments (as findings.sql names them).
succeeded_write AS (
    SELECT *,
        if(idempotency_key IS NULL, tool, NULL) AS action_tool,
        if(idempotency_key IS NULL, args_fingerprint, NULL) AS action_args
    FROM tool_calls
    WHERE side_effect = 'write' AND status = 'succeeded' AND NOT replayed
      -- Without a key, the action is its arguments: unrecorded ones name none.
      AND (idempotency_key IS NOT NULL OR args_fingerprint IS NOT NULL)
),
duplicate_key AS (
    SELECT conversation_id, idempotency_key, action_tool, action_args
    FROM succeeded_write
    GROUP BY conversation_id, idempotency_key, action_tool, action_args
    HAVING count() >= 2
),
duplicate_write AS (
    SELECT
        'duplicate_write' AS kind, conversation_id,
        if(uniqExact(tool) = 1, min(tool), NULL) AS tool,
        idempotency_key, count() AS count,
        arrayMap(x -> x.2, arraySort(groupArray((start_time, span_id)))) AS span_ids,
        arraySort(groupUniqArray(trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        toJSONString(CAST(
            (arraySort(groupUniqArray(tool)),
             arraySort(groupUniqArray(args_fingerprint)),
             arrayMap(x -> x.3, arraySort(groupArray((start_time, span_id, call_id)))),
             argMin(arguments, (start_time, span_id)),
             format(
                 '{} writes of {} for one action all ran: {}.',
                 toString(count()), arrayStringConcat(arraySort(groupUniqArray(tool)), ', '),
                 if(idempotency_key IS NULL,
                    'give the action one idempotency key so '
                    || 'that a repeat returns the stored result instead of writing again',
                    'its idempotency key did not stop the repeat, so make every worker '
                    || 'use the same shared idempotency store'))),
            'Tuple(tools Array(Nullable(String)), args_fingerprints Array(Nullable(String)),
                   call_ids Array(Nullable(String)), arguments Nullable(String),
                   explanation String)')) AS detail
    FROM succeeded_write
    -- IN compares NULLs as equal (transform_null_in).
    WHERE (conversation_id, idempotency_key, action_tool, action_args)
        IN (SELECT * FROM duplicate_key)
    GROUP BY conversation_id, idempotency_key, action_tool, action_args
),
-- idempotency_conflict: one key used with different argument fingerprints.
-- The conflicting keys first: where every write has a key (as it should),
-- collecting the lists of every key would cost what duplicate_write's did.
conflicting_key AS (
    SELECT idempotency_key
    FROM tool_calls
    WHERE idempotency_key IS NOT NULL
    GROUP BY idempotency_key
    HAVING uniqExact(args_fingerprint) > 1
),
idempotency_conflict AS (
    SELECT
        'idempotency_conflict' AS kind,
        argMin(conversation_id, (start_time, span_id)) AS conversation_id,
        if(uniqExact(tool) = 1, min(tool), NULL) AS tool,
        idempotency_key, count() AS count,
        arrayMap(x -> x.2, arraySort(groupArray((start_time, span_id)))) AS span_ids,
        arraySort(groupUniqArray(trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        toJSONString(CAST(
            (arraySort(groupUniqArray(tool)),
             arraySort(groupUniqArray(args_fingerprint)),
             arraySort(groupUniqArray(conversation_id)),
             arrayMap(x -> x.3, arraySort(groupArray((start_time, span_id, status)))),
             format(
                 'Idempotency key {} was used for {} different argument sets: derive the key from '
                 || 'the action it protects, so different actions never share one.',
                 assumeNotNull(idempotency_key), toString(uniqExact(args_fingerprint)))),
            'Tuple(tools Array(Nullable(String)), args_fingerprints Array(Nullable(String)),
                   conversations Array(String), statuses Array(String), explanation String)')) AS detail
    FROM tool_calls
    WHERE idempotency_key IN (SELECT idempotency_key FROM conflicting_key)
    GROUP BY idempotency_key
),
-- The attempts of the calls that may be unsafe retries, in order: outcomes and
-- read-backs. (A CTE is computed where it is used, so each use reads only the
-- attempts of the calls it needs.)
retried_write AS (
    SELECT trace_id, span_id
    FROM tool_calls
    WHERE side_effect = 'write' AND idempotency_key IS NULL AND attempts > 1
),
call_attempts AS (
    SELECT
        trace_id, call_span_id,
        arrayMap(x -> x.2, arraySort(groupArray((attempt, outcome)))) AS outcomes,
        groupArray((attempt, read_back)) AS read_backs
    FROM _toolspan_attempt_rows
    WHERE (trace_id, call_span_id) IN (SELECT trace_id, span_id FROM retried_write)
    GROUP BY trace_id, call_span_id
),
-- unsafe_retry: a write without an idempotency key attempted more than once
-- inside one logical call, unless the tool's read-back showed the effect
-- absent after every attempt before the last (toolspan.read_back = 'absent').
unsafe_retry AS (
    SELECT
        'unsafe_retry' AS kind, c.conversation_id AS conversation_id, c.tool AS tool,
        CAST(NULL, 'Nullable(String)') AS idempotency_key,
        toUInt64(c.attempts) AS count,
        [c.span_id] AS span_ids, [c.trace_id] AS trace_ids,
        c.start_time AS first_seen, c.end_time AS last_seen,
        toJSONString(CAST(
            (c.call_id, c.status, c.error_code, c.arguments, a.outcomes,
             format(
                 'A write of {} without an idempotency key was attempted {} times: give it a key '
                 || '(or a read-back that checks the effect) before letting it be retried.',
                 coalesce(c.tool, '?'), toString(c.attempts))),
            'Tuple(call_id Nullable(String), status String, error_code Nullable(String),
                   arguments Nullable(String), attempt_outcomes Array(Nullable(String)),
                   explanation String)')) AS detail
    FROM tool_calls AS c
    JOIN call_attempts AS a ON a.trace_id = c.trace_id AND a.call_span_id = c.span_id
    WHERE c.side_effect = 'write' AND c.idempotency_key IS NULL AND c.attempts > 1
      AND arrayExists(x -> x.1 < c.attempts AND coalesce(x.2, '') <> 'absent', a.read_backs)
),
-- unverified_keyed_retry: a keyed write ran again after a failure that left its
-- outcome unknown with nothing but the service's honouring of the key to stop a
-- second effect (findings.sql has the rule): an attempt after an ambiguous one
-- with no read-back (or a failed one) after it, or a run on a key whose earlier
-- run ended unknown (read_back = 'required'), on a tool not declared
-- keys_honoured=True.
keyed_write AS (
    SELECT trace_id, span_id
    FROM tool_calls
    WHERE side_effect = 'write' AND idempotency_key IS NOT NULL AND NOT replayed
      AND coalesce(keys_honoured, '') <> 'true' AND attempts >= 1
),
keyed_attempts AS (
    SELECT
        trace_id, call_span_id,
        arrayMap(x -> x.2, arraySort(groupArray((attempt, outcome)))) AS outcomes,
        groupArray((attempt, outcome, read_back)) AS tried
    FROM _toolspan_attempt_rows
    WHERE (trace_id, call_span_id) IN (SELECT trace_id, span_id FROM keyed_write)
    GROUP BY trace_id, call_span_id
),
unverified_keyed_retry AS (
    SELECT
        'unverified_keyed_retry' AS kind, c.conversation_id AS conversation_id, c.tool AS tool,
        c.idempotency_key AS idempotency_key,
        toUInt64(c.attempts) AS count,
        [c.span_id] AS span_ids, [c.trace_id] AS trace_ids,
        c.start_time AS first_seen, c.end_time AS last_seen,
        toJSONString(CAST(
            (c.call_id, c.status, c.keys_honoured, a.outcomes,
             format(
                 '{} ran again under idempotency key {} after a failure that may have committed '
                 || 'it, and nothing checked the effect: if the service ignores the key, the write '
                 || 'ran twice. Give the tool a read_back, or check that the service honours keys '
                 || '(toolspan.tracer.testing.check_keys_honoured) and declare keys_honoured=True.',
                 coalesce(c.tool, '?'), assumeNotNull(c.idempotency_key))),
            'Tuple(call_id Nullable(String), status String, keys_honoured Nullable(String),
                   attempt_outcomes Array(Nullable(String)), explanation String)')) AS detail
    FROM tool_calls AS c
    LEFT JOIN keyed_attempts AS a ON a.trace_id = c.trace_id AND a.call_span_id = c.span_id
    WHERE c.side_effect = 'write' AND c.idempotency_key IS NOT NULL AND NOT c.replayed
      AND coalesce(c.keys_honoured, '') <> 'true' AND c.attempts >= 1
      AND (c.read_back = 'required'
           OR arrayExists(
               x -> x.1 < c.attempts
                    AND x.2 IN ('timeout', 'connection_error', 'http_500', 'http_502',
                                'http_503', 'http_504')
                    AND coalesce(x.3, 'failed') = 'failed',
               a.tried))
),
-- key_churn: the same write (one conversation, one request, same tool and
-- arguments) succeeded under two or more different idempotency keys: a key
-- minted per attempt, which no store can dedupe. Groups with two keys are
-- found on the keyed calls first; then every call of those groups is listed
-- (IN compares NULLs as equal: transform_null_in).
churned_key AS (
    SELECT conversation_id, request_id, tool, args_fingerprint
    FROM tool_calls
    WHERE side_effect = 'write' AND status = 'succeeded' AND NOT replayed
      AND idempotency_key IS NOT NULL
    GROUP BY conversation_id, request_id, tool, args_fingerprint
    HAVING uniqExact(idempotency_key) >= 2
),
key_churn AS (
    SELECT
        'key_churn' AS kind, conversation_id, tool, CAST(NULL, 'Nullable(String)') AS idempotency_key,
        count() AS count,
        arrayMap(x -> x.2, arraySort(groupArray((start_time, span_id)))) AS span_ids,
        arraySort(groupUniqArray(trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        toJSONString(CAST(
            (arraySort(groupUniqArray(idempotency_key)), request_id, args_fingerprint,
             argMin(arguments, (start_time, span_id)),
             format(
                 '{} writes of {} with the same arguments ran under {} different idempotency keys: '
                 || 'derive the key once per logical action and reuse it on every retry.',
                 toString(count()), coalesce(tool, '?'), toString(uniqExact(idempotency_key)))),
            'Tuple(keys Array(String), request_id Nullable(String), args_fingerprint Nullable(String),
                   arguments Nullable(String), explanation String)')) AS detail
    FROM tool_calls
    WHERE side_effect = 'write' AND status = 'succeeded' AND NOT replayed
      AND (conversation_id, request_id, tool, args_fingerprint) IN (SELECT * FROM churned_key)
    GROUP BY conversation_id, request_id, tool, args_fingerprint
),
-- write_after_unknown: a write whose outcome was unknown (it may have
-- happened) run again later with the same arguments, and nothing read the
-- effect back first (the repeat's toolspan.read_back is absent).
unknown_write AS (
    SELECT trace_id, span_id, conversation_id, tool, args_fingerprint, idempotency_key,
           error_code, arguments, start_time, end_time
    FROM tool_calls
    WHERE side_effect = 'write' AND args_fingerprint IS NOT NULL
      -- findings.sql, toolspan_unknown_outcome.
      AND (error_code IN ('unknown_outcome', 'timeout', 'connection_error')
           OR (source <> 'toolspan'
               AND match(error_code, '(?i)time[_ .-]?out|timed[_ .-]?out|connection')
               AND NOT match(error_code, '(?i)refused')))
),
unread_repeat AS (
    SELECT
        u.trace_id AS unknown_trace_id, u.span_id AS unknown_span_id,
        r.trace_id AS trace_id, r.span_id AS span_id, r.start_time AS start_time, r.end_time AS end_time
    -- The unknown writes on the right: a join holds its right side in memory
    -- (10M spans: 0.67 s with all the calls there, 0.08 s this way).
    FROM tool_calls AS r
    JOIN unknown_write AS u
        ON r.conversation_id = u.conversation_id
       AND isNotDistinctFrom(r.tool, u.tool)
       AND r.args_fingerprint = u.args_fingerprint
    WHERE r.start_time >= u.end_time
      AND r.attempts >= 1 AND NOT r.replayed AND r.read_back IS NULL
      AND NOT (r.trace_id = u.trace_id AND r.span_id = u.span_id)
),
repeat_group AS (
    SELECT
        unknown_trace_id, unknown_span_id, count() AS repeats,
        arrayMap(x -> x.2, arraySort(groupArray((start_time, span_id)))) AS span_ids,
        groupUniqArray(trace_id) AS trace_ids,
        max(end_time) AS last_end
    FROM unread_repeat
    GROUP BY unknown_trace_id, unknown_span_id
),
write_after_unknown AS (
    SELECT
        'write_after_unknown' AS kind, u.conversation_id AS conversation_id, u.tool AS tool,
        u.idempotency_key AS idempotency_key,
        1 + r.repeats AS count,
        arrayConcat([u.span_id], r.span_ids) AS span_ids,
        arraySort(arrayDistinct(arrayConcat([u.trace_id], r.trace_ids))) AS trace_ids,
        u.start_time AS first_seen, greatest(u.end_time, r.last_end) AS last_seen,
        toJSONString(CAST(
            (u.error_code, u.args_fingerprint, u.arguments, r.repeats,
             format(
                 'A write of {} ended with {} (it may have happened) and ran again {} without '
                 || 'reading its effect back: check the effect with a read-back, or reuse the '
                 || 'idempotency key, before repeating it.',
                 coalesce(u.tool, '?'), assumeNotNull(u.error_code),
                 if(r.repeats = 1, 'once', concat(toString(r.repeats), ' times')))),
            'Tuple(error_code Nullable(String), args_fingerprint Nullable(String),
                   arguments Nullable(String), repeats UInt64, explanation String)')) AS detail
    FROM unknown_write AS u
    JOIN repeat_group AS r ON r.unknown_trace_id = u.trace_id AND r.unknown_span_id = u.span_id
),
-- retried_permanent: an attempt that failed with a code waiting cannot fix
-- (a 4xx other than 408/409/429, invalid arguments) was followed by another
-- attempt of the same call.
-- The first permanent failure of each call is followed by another attempt
-- exactly when any of them is. Only calls with one are read again.
first_permanent AS (
    SELECT trace_id, call_span_id, min(attempt) AS attempt, argMin(outcome, attempt) AS outcome
    FROM _toolspan_attempt_rows
    WHERE outcome IN (
        'http_400', 'http_401', 'http_403', 'http_404', 'http_405', 'http_422', 'invalid_arguments')
      AND attempt IS NOT NULL
    GROUP BY trace_id, call_span_id
),
permanent_call_attempts AS (
    SELECT
        trace_id, call_span_id,
        arrayMap(x -> x.2, arraySort(groupArray((attempt, outcome)))) AS outcomes,
        max(attempt) AS last_attempt
    FROM _toolspan_attempt_rows
    WHERE (trace_id, call_span_id) IN (SELECT trace_id, call_span_id FROM first_permanent)
    GROUP BY trace_id, call_span_id
),
permanent_attempt AS (
    SELECT f.trace_id AS trace_id, f.call_span_id AS call_span_id, f.attempt AS attempt,
           f.outcome AS outcome, s.outcomes AS outcomes
    FROM first_permanent AS f
    JOIN permanent_call_attempts AS s ON s.trace_id = f.trace_id AND s.call_span_id = f.call_span_id
    WHERE f.attempt < s.last_attempt
),
retried_permanent AS (
    SELECT
        'retried_permanent' AS kind, c.conversation_id AS conversation_id, c.tool AS tool,
        c.idempotency_key AS idempotency_key,
        toUInt64(c.attempts) AS count,
        [c.span_id] AS span_ids, [c.trace_id] AS trace_ids,
        c.start_time AS first_seen, c.end_time AS last_seen,
        toJSONString(CAST(
            (c.call_id, c.status, p.outcomes,
             format(
                 '{} was attempted {} times although attempt {} failed with {}, which waiting '
                 || 'cannot fix: do not retry that code; fix the call (arguments, permissions, '
                 || 'target) instead.',
                 coalesce(c.tool, '?'), toString(c.attempts), toString(p.attempt),
                 assumeNotNull(p.outcome))),
            'Tuple(call_id Nullable(String), status String, attempt_outcomes Array(Nullable(String)),
                   explanation String)')) AS detail
    FROM tool_calls AS c
    JOIN permanent_attempt AS p ON p.trace_id = c.trace_id AND p.call_span_id = c.span_id
    WHERE c.attempts >= 2
),
-- parallel_write: writes on one resource (toolspan.resource.key) whose time
-- ranges overlap in one conversation: they race.
resource_write AS (
    SELECT trace_id, span_id, conversation_id, resource_key, tool, start_time, end_time
    FROM tool_calls
    WHERE side_effect = 'write' AND attempts >= 1 AND resource_key IS NOT NULL
),
overlapping_write AS (
    SELECT DISTINCT
        a.trace_id AS trace_id, a.span_id AS span_id, a.conversation_id AS conversation_id,
        a.resource_key AS resource_key, a.tool AS tool, a.start_time AS start_time,
        a.end_time AS end_time
    FROM resource_write AS a
    JOIN resource_write AS b
        ON b.conversation_id = a.conversation_id AND b.resource_key = a.resource_key
    WHERE a.start_time < b.end_time AND b.start_time < a.end_time
      AND NOT (a.trace_id = b.trace_id AND a.span_id = b.span_id)
),
parallel_write AS (
    SELECT
        'parallel_write' AS kind, conversation_id,
        if(uniqExact(tool) = 1, min(tool), NULL) AS tool,
        CAST(NULL, 'Nullable(String)') AS idempotency_key, count() AS count,
        arrayMap(x -> x.2, arraySort(groupArray((start_time, span_id)))) AS span_ids,
        arraySort(groupUniqArray(trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        toJSONString(CAST(
            (resource_key, arraySort(groupUniqArray(tool)),
             format(
                 '{} writes on resource {} ({}) ran at the same time: run writes on one resource '
                 || 'one after another (declare resource_key so the executor serialises them).',
                 toString(count()), assumeNotNull(resource_key),
                 arrayStringConcat(arraySort(groupUniqArray(tool)), ', '))),
            'Tuple(resource_key Nullable(String), tools Array(Nullable(String)),
                   explanation String)')) AS detail
    FROM overlapping_write
    GROUP BY conversation_id, resource_key
)
SELECT * FROM (
    SELECT * FROM loop
    UNION ALL SELECT * FROM duplicate_write
    UNION ALL SELECT * FROM idempotency_conflict
    UNION ALL SELECT * FROM unsafe_retry
    UNION ALL SELECT * FROM unverified_keyed_retry
    UNION ALL SELECT * FROM key_churn
    UNION ALL SELECT * FROM write_after_unknown
    UNION ALL SELECT * FROM retried_permanent
    UNION ALL SELECT * FROM parallel_write
)
ORDER BY kind, first_seen, conversation_id, tool
