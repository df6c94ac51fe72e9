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

-- name: calls_by_source
-- The coverage (docs/analyzer.md#coverage): tool calls per instrumentation
-- form, as derive.sql tells them apart; a new source value appears here as it is.
SELECT source, count(*) AS calls
FROM tool_calls
WHERE source <> 'attempt'
GROUP BY source
ORDER BY source;

-- name: coverage
-- The rest of the coverage: spans read, the spans that look like GenAI work
-- (an LLM, agent, chat or tool span) by any instrumentation and those of them
-- in traces where no tool call was recognised, and the calls whose arguments
-- were not recorded. GenAI-looking: GenAI semantic conventions (OpenLLMetry,
-- Google ADK, Strands, Pydantic AI, toolspan), OpenInference, Traceloop, MLflow, the
-- Vercel AI SDK's ai.* operation ids, Pydantic AI's own scope and its older
-- agent run spans (agent_name with logfire.msg). Keys are tested once per
-- attribute shape, not per span. clickhouse_summary.sql has the same rule.
WITH genai_shapes AS (
    SELECT
        shape AS attribute_shape,
        list_has_any(keys, ['gen_ai.operation.name', 'gen_ai.system', 'gen_ai.provider.name',
                            'gen_ai.agent.name', 'gen_ai.tool.name', 'openinference.span.kind',
                            'traceloop.span.kind', 'mlflow.spanType'])
            OR (list_contains(keys, 'agent_name') AND list_contains(keys, 'logfire.msg')) AS by_keys,
        list_position(keys, 'ai.operationId') AS operation_at
    FROM attribute_shapes
),
genai AS (
    SELECT s.trace_id
    FROM span_rows s
    LEFT JOIN genai_shapes g USING (attribute_shape)
    WHERE coalesce(g.by_keys, false)
       OR s.scope_name = 'pydantic-ai'
       OR coalesce(starts_with(s.attribute_vals[g.operation_at], 'ai.'), false)
),
traces_with_calls AS (SELECT DISTINCT trace_id FROM tool_call_rows)
SELECT
    (SELECT count(*) FROM span_rows) AS spans,
    count(*) AS genai_spans,
    count(*) FILTER (WHERE t.trace_id IS NULL) AS genai_spans_without_calls,
    (SELECT count(*) FROM tool_calls WHERE args_fingerprint IS NULL) AS unverifiable_calls
FROM genai
LEFT JOIN traces_with_calls t USING (trace_id);
