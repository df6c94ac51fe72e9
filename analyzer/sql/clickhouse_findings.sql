-- ClickHouse: every finding, with the rules of findings.sql (docs/analyzer.md),
-- over tool_calls and _toolspan_attempt_rows. One row per finding; detail is
-- JSON text (a named tuple through toJSONString). $min_repeats is the loop
-- threshold. Lists are ordered as DuckDB's list(... ORDER BY start_time,
-- span_id): groupArray of (start_time, span_id, value) tuples, sorted.
-- Run with join_use_nulls = 1 and output_format_json_quote_64bit_integers = 0.

-- name: findings
WITH
-- loop: >= min_repeats logical calls in one conversation with the same tool,
-- the same arguments and the same answer. Attempts inside a call are not calls.
loop_group AS (
    SELECT
        conversation_id, tool, args_fingerprint, answer,
        count() AS count,
        arrayMap(x -> x.2, arraySort(groupArray((start_time, span_id)))) AS span_ids,
        arraySort(groupUniqArray(trace_id)) AS trace_ids,
        min(start_time) AS first_seen,
        max(end_time) AS last_seen,
        -- Any one of the group's arguments (they share a fingerprint): the first.
        arrayMap(x -> x.3, arraySort(groupArray((start_time, span_id, arguments))))[1] AS arguments,
        -- Every call after the first was wasted: its time in the tool plus its waits.
        sum(duration_ms) - argMin(duration_ms, start_time) AS wasted_ms,
        sum(coalesce(total_wait_s, 0)) - argMin(coalesce(total_wait_s, 0), start_time) AS wasted_wait_s,
        sum(attempts) AS attempts
    FROM tool_calls
    GROUP BY conversation_id, tool, args_fingerprint, answer
    HAVING count() >= $min_repeats
),
loop AS (
    SELECT
        'loop' AS kind, conversation_id, tool, CAST(NULL, 'Nullable(String)') AS idempotency_key,
        count, span_ids, trace_ids, first_seen, last_seen,
        toJSONString(CAST(
            (args_fingerprint, arguments, answer, attempts, round(wasted_ms, 3), round(wasted_wait_s, 3),
             -- Other repeated calls of the same conversation over the same time: a cycle.
             arraySort(arrayDistinct(arrayMap(o -> o.1, arrayFilter(
                 o -> o.2 <= last_seen AND first_seen <= o.3,
                 groupArray((tool, first_seen, last_seen)) OVER (PARTITION BY conversation_id)))))),
            'Tuple(args_fingerprint Nullable(String), arguments Nullable(String), answer Nullable(String),
                   attempts Int64, wasted_ms Float64, wasted_wait_s Float64,
                   cycle_tools Array(Nullable(String)))')) AS detail
    FROM loop_group
),
-- duplicate_write: a write that executed successfully more than once for the
-- same logical action (same idempotency key, else same tool and arguments).
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
             arrayMap(x -> x.3, arraySort(groupArray((start_time, span_id, arguments))))[1]),
            'Tuple(tools Array(Nullable(String)), args_fingerprints Array(Nullable(String)),
                   call_ids Array(Nullable(String)), arguments Nullable(String))')) AS detail
    FROM tool_calls
    WHERE side_effect = 'write' AND status = 'succeeded' AND NOT replayed
    GROUP BY
        conversation_id, idempotency_key,
        if(idempotency_key IS NULL, tool, NULL),
        if(idempotency_key IS NULL, args_fingerprint, NULL)
    HAVING count() >= 2
),
-- idempotency_conflict: one key used with different argument fingerprints.
idempotency_conflict AS (
    SELECT
        'idempotency_conflict' AS kind,
        argMin(conversation_id, start_time) AS conversation_id,
        if(uniqExact(tool) = 1, min(tool), NULL) AS tool,
        idempotency_key, count() AS count,
        arrayMap(x -> x.2, arraySort(groupArray((start_time, span_id)))) AS span_ids,
        arraySort(groupUniqArray(trace_id)) AS trace_ids,
        min(start_time) AS first_seen, max(end_time) AS last_seen,
        toJSONString(CAST(
            (arraySort(groupUniqArray(tool)),
             arraySort(groupUniqArray(args_fingerprint)),
             arraySort(groupUniqArray(conversation_id)),
             arrayMap(x -> x.3, arraySort(groupArray((start_time, span_id, status))))),
            'Tuple(tools Array(Nullable(String)), args_fingerprints Array(Nullable(String)),
                   conversations Array(String), statuses Array(String))')) AS detail
    FROM tool_calls
    WHERE idempotency_key IS NOT NULL
    GROUP BY idempotency_key
    HAVING uniqExact(args_fingerprint) > 1
),
-- unsafe_retry: a write without an idempotency key attempted more than once
-- inside one logical call, unless the tool's read-back showed the effect
-- absent after every attempt before the last (toolspan.read_back = 'absent').
call_attempts AS (
    SELECT
        trace_id, call_span_id,
        arrayMap(x -> x.2, arraySort(groupArray((attempt, outcome)))) AS outcomes,
        groupArray((attempt, read_back)) AS read_backs
    FROM _toolspan_attempt_rows
    GROUP BY trace_id, call_span_id
),
unsafe_retry AS (
    SELECT
        'unsafe_retry' AS kind, c.conversation_id AS conversation_id, c.tool AS tool,
        CAST(NULL, 'Nullable(String)') AS idempotency_key,
        toUInt64(c.attempts) AS count,
        [c.span_id] AS span_ids, [c.trace_id] AS trace_ids,
        c.start_time AS first_seen, c.end_time AS last_seen,
        toJSONString(CAST(
            (c.call_id, c.status, c.error_code, c.arguments, a.outcomes),
            'Tuple(call_id Nullable(String), status String, error_code Nullable(String),
                   arguments Nullable(String), attempt_outcomes Array(Nullable(String)))')) AS detail
    FROM tool_calls AS c
    JOIN call_attempts AS a ON a.trace_id = c.trace_id AND a.call_span_id = c.span_id
    WHERE c.side_effect = 'write' AND c.idempotency_key IS NULL AND c.attempts > 1
      AND arrayExists(x -> x.1 < c.attempts AND coalesce(x.2, '') <> 'absent', a.read_backs)
)
SELECT * FROM (
    SELECT * FROM loop
    UNION ALL SELECT * FROM duplicate_write
    UNION ALL SELECT * FROM idempotency_conflict
    UNION ALL SELECT * FROM unsafe_retry
)
ORDER BY kind, first_seen, conversation_id, tool
