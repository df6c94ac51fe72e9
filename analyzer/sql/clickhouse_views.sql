-- ClickHouse: what `toolspan clickhouse init` creates in the views database
-- ($db). The collector's table ($source) gets two materialized views that
-- copy, from every block the collector inserts, its tool spans and the
-- conversation ids of its spans into two narrow tables of $db; the views
-- tool_calls, attempts, conversations and findings read those (deduplicated
-- by trace and span id), never the raw spans. The collector's table is read,
-- never written. docs/clickhouse.md has the trade-offs.
-- Each narrow table's comment names the statement that fills it (a hash of
-- its text, analyzer/_clickhouse.py): an analysis reads a copy in place of
-- the raw spans only when it was made by the analysis' own statement.

-- name: tool_span_rows
CREATE TABLE IF NOT EXISTS $db._toolspan_tool_span_rows
ENGINE = ReplacingMergeTree
PARTITION BY toDate(start_time)
-- request_no: the model's requested calls of one LLM span are rows of their own.
ORDER BY (trace_id, span_id, request_no)
COMMENT '$tool_spans_version'
EMPTY AS $tool_spans

-- name: conversation_rows
CREATE TABLE IF NOT EXISTS $db._toolspan_conversation_rows
ENGINE = ReplacingMergeTree
ORDER BY (trace_id, conversation_id, Timestamp)
COMMENT '$conversations_version'
EMPTY AS $conversations

-- name: tool_spans_mv
-- With the analyzer's settings: the collector's inserts run with their own.
CREATE MATERIALIZED VIEW $db._toolspan_tool_spans_mv TO $db._toolspan_tool_span_rows
AS $tool_spans
SETTINGS $settings

-- name: conversations_mv
CREATE MATERIALIZED VIEW $db._toolspan_conversations_mv TO $db._toolspan_conversation_rows
AS $conversations
SETTINGS $settings

-- name: backfill_tool_spans
INSERT INTO $db._toolspan_tool_span_rows $tool_spans

-- name: backfill_conversations
INSERT INTO $db._toolspan_conversation_rows $conversations

-- name: conversation_ids
-- Every span's conversation id (the MV's rows): conversations of traces, with
-- the span's start, so that an analysis of a time range reads its own. As
-- written: the readers take the least and make that valid UTF-8, as
-- clickhouse_derive.sql's trace_conversations does.
SELECT TraceId AS trace_id, coalesce(
        toolspan_attr(SpanAttributes, 'gen_ai.conversation.id'),
        toolspan_attr(SpanAttributes, 'session.id'),
        toolspan_attr(SpanAttributes, 'ai.telemetry.metadata.sessionId'), '') AS conversation_id,
        Timestamp
FROM $source
WHERE toolspan_has(SpanAttributes, 'gen_ai.conversation.id') OR toolspan_has(SpanAttributes, 'session.id')
   OR toolspan_has(SpanAttributes, 'ai.telemetry.metadata.sessionId')

-- name: tool_spans_view
-- FINAL: the table's own deduplication (by its sorting key, trace and span
-- id), merged as it is read in order: a span delivered twice is one row. On
-- 5.2M tool spans in one part it took 1.4 s where LIMIT 1 BY's hash table
-- took 2.0-3.4 s; in 61 parts not merged yet, the same as LIMIT 1 BY (2.9-3.9
-- s). Duplicates are the same span, so which copy survives does not matter.
SELECT * FROM $db._toolspan_tool_span_rows FINAL

-- name: trace_conversations_view
SELECT trace_id, toValidUTF8(min(conversation_id)) AS conversation_id
FROM $db._toolspan_conversation_rows
WHERE trace_id IN (SELECT trace_id FROM $db._toolspan_tool_spans)
GROUP BY trace_id

-- name: copied_tool_spans
-- An analysis' tool spans (clickhouse_derive.sql's tool_spans), read from the
-- copy instead of the raw spans: $range is on start_time here (the span's
-- start to the microsecond, as the ranges' bounds are written).
-- Deduplicated with FINAL, as tool_spans_view.
SELECT * FROM $db._toolspan_tool_span_rows FINAL WHERE $range

-- name: copied_trace_conversations
-- clickhouse_derive.sql's trace_conversations, from the copy.
SELECT trace_id, toValidUTF8(min(conversation_id)) AS conversation_id
FROM $db._toolspan_conversation_rows
WHERE $range AND trace_id IN (SELECT trace_id FROM _toolspan_tool_spans)
GROUP BY trace_id
