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

-- name: calls_by_source
SELECT source, count() AS calls
FROM tool_calls
WHERE source <> 'attempt'
GROUP BY source
ORDER BY source

-- name: genai_spans
-- GenAI-looking spans in range, by the rule of summary.sql (genai_spans), and
-- those in traces where no tool call was recognised. Counted once per trace
-- and span id, as every figure but `spans`: the collector may deliver a span
-- twice. Only these spans' ids are held (uniqExact), not every span's.
SELECT
    uniqExact(TraceId, SpanId) AS genai_spans,
    uniqExactIf(TraceId, SpanId, TraceId NOT IN (SELECT trace_id FROM tool_calls)) AS genai_spans_without_calls
FROM $source
WHERE $range
  AND (toolspan_has(SpanAttributes, 'gen_ai.operation.name')
       OR toolspan_has(SpanAttributes, 'gen_ai.system')
       OR toolspan_has(SpanAttributes, 'gen_ai.provider.name')
       OR toolspan_has(SpanAttributes, 'gen_ai.agent.name')
       OR toolspan_has(SpanAttributes, 'gen_ai.tool.name')
       OR toolspan_has(SpanAttributes, 'openinference.span.kind')
       OR toolspan_has(SpanAttributes, 'traceloop.span.kind')
       OR toolspan_has(SpanAttributes, 'mlflow.spanType')
       OR (toolspan_has(SpanAttributes, 'agent_name') AND toolspan_has(SpanAttributes, 'logfire.msg'))
       OR ScopeName = 'pydantic-ai'
       OR startsWith(ifNull(toolspan_attr(SpanAttributes, 'ai.operationId'), ''), 'ai.'))
