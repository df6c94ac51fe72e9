-- ClickHouse: the summary figures of summary.sql over tool_calls, plus the
-- spans in range read from the collector's table ($source, $range).

-- name: totals
SELECT
    count() AS calls,
    coalesce(sum(call_attempts), 0) AS attempts,
    coalesce(sum(greatest(call_attempts - 1, 0)), 0) AS retries,
    coalesce(round(sum(wait_s), 3), 0) AS scheduled_wait_s,
    countIf(status = 'attempt_limit') AS stopped_by_attempt_limit,
    countIf(status = 'wait_budget') AS stopped_by_wait_budget,
    uniqExact(conversation_id) AS conversations,
    countIf(args_fingerprint IS NULL) AS unverifiable
-- Renamed first: ClickHouse aliases are visible everywhere in the SELECT.
FROM (SELECT attempts AS call_attempts, total_wait_s AS wait_s, status, conversation_id, args_fingerprint
      FROM tool_calls)

-- name: statuses_by_tool
SELECT coalesce(tool, '?') AS tool, status, count() AS calls
FROM tool_calls
GROUP BY tool, status
ORDER BY tool, status

-- name: spans
-- Rows in range, as stored: a span the collector delivered twice counts twice
-- here (counting distinct ids would hold every id of the range in memory),
-- once in every other figure.
SELECT count() AS spans FROM $source WHERE $range
