-- What the Analyzer reads back for its reports: summary figures and findings.

-- name: totals
SELECT
    count(*) AS calls,
    coalesce(sum(attempts), 0) AS attempts,
    coalesce(sum(greatest(attempts - 1, 0)), 0) AS retries,
    coalesce(round(sum(total_wait_s), 3), 0) AS scheduled_wait_s,
    count(*) FILTER (WHERE status = 'attempt_limit') AS stopped_by_attempt_limit,
    count(*) FILTER (WHERE status = 'wait_budget') AS stopped_by_wait_budget,
    count(DISTINCT conversation_id) AS conversations,
    -- Calls whose arguments were not recorded: no loop or duplicate can be
    -- told from them (findings.sql).
    count(*) FILTER (WHERE args_fingerprint IS NULL) AS unverifiable
FROM tool_calls;

-- name: statuses_by_tool
SELECT coalesce(tool, '?') AS tool, status, count(*) AS calls
FROM tool_calls
GROUP BY ALL
ORDER BY tool, status;

-- name: inputs
SELECT
    (SELECT count(*) FROM ingested_files) AS files,
    (SELECT coalesce(sum(lines), 0) FROM ingested_files) AS lines,
    (SELECT count(*) FROM span_rows) AS spans,
    (SELECT count(*) FROM bad_lines) AS bad_lines;

-- name: findings
-- The findings with the default min_repeats, materialised at ingest.
SELECT * FROM finding_rows ORDER BY kind, first_seen, conversation_id, tool;

-- name: findings_min_repeats
SELECT * FROM toolspan_findings(?) ORDER BY kind, first_seen, conversation_id, tool;
