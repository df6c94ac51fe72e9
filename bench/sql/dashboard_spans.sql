-- The dashboard benchmark's spans, generated inside ClickHouse into the
-- collector's otel_traces (tests/clickhouse_otel.py's DDL). Eight spans a
-- group (one trace): an agent span, a model span, a read tool call with two
-- attempts (a timeout, then ok), a write tool call, and three model/HTTP spans.
-- Conversations of 25 traces at every size; a tenth of the read calls fail at the attempt
-- limit; arguments repeat inside a conversation, so loops and duplicate writes
-- are found.

-- name: insert_spans
INSERT INTO $table
SELECT
    toDateTime64('2026-01-05 00:00:00', 9, 'UTC') + toIntervalMillisecond(g * 50 + k * 2) AS Timestamp,
    leftPad(lower(hex(g + 1)), 32, '0') AS TraceId,
    leftPad(lower(hex(n + 1)), 16, '0') AS SpanId,
    multiIf(k = 0, '', k IN (3, 4), leftPad(lower(hex(g * 8 + 3)), 16, '0'),
        leftPad(lower(hex(g * 8 + 1)), 16, '0')) AS ParentSpanId,
    '' AS TraceState,
    multiIf(k = 0, 'invoke_agent bench', k = 2, concat('execute_tool ', read_tool),
        k IN (3, 4), concat('attempt ', read_tool), k = 5, concat('execute_tool ', write_tool),
        k = 7, 'GET', 'chat bench-model') AS SpanName,
    'Internal' AS SpanKind,
    'bench-agent' AS ServiceName,
    map('service.name', 'bench-agent') AS ResourceAttributes,
    if(k IN (2, 3, 4, 5), 'toolspan', 'bench') AS ScopeName,
    '' AS ScopeVersion,
    multiIf(
        k = 0, map('gen_ai.operation.name', 'invoke_agent', 'gen_ai.conversation.id', conversation),
        k = 2, map(
            'gen_ai.operation.name', 'execute_tool', 'gen_ai.tool.name', read_tool,
            'gen_ai.tool.call.id', concat('call_', toString(n)), 'gen_ai.conversation.id', conversation,
            'toolspan.status', if(g % 10 = 0, 'attempt_limit', 'succeeded'),
            'toolspan.attempts', '2', 'toolspan.side_effect', 'none', 'toolspan.total_wait_s', '0.5',
            'toolspan.service', 'orders-api',
            'toolspan.args.hash', lower(hex(SHA256(concat('args-', toString(g % greatest(1, intDiv({spans:UInt64}, 200))))))),
            'toolspan.result.hash', lower(hex(SHA256(concat('result-', toString(g % greatest(1, intDiv({spans:UInt64}, 200)))))))),
        k IN (3, 4), map(
            'toolspan.attempt', toString(k - 2), 'gen_ai.tool.name', read_tool,
            'toolspan.attempt.outcome', if(k = 3, 'timeout', if(g % 10 = 0, 'timeout', 'ok')),
            'toolspan.retry.delay_s', if(k = 3, '0.5', '0')),
        k = 5, map(
            'gen_ai.operation.name', 'execute_tool', 'gen_ai.tool.name', write_tool,
            'gen_ai.tool.call.id', concat('call_', toString(n)), 'gen_ai.conversation.id', conversation,
            'toolspan.status', 'succeeded', 'toolspan.attempts', '1', 'toolspan.side_effect', 'write',
            'toolspan.args.hash', lower(hex(SHA256(concat('write-', toString(g % greatest(1, intDiv({spans:UInt64}, 200))))))),
            'toolspan.result.hash', lower(hex(SHA256(concat('written-', toString(g)))))),
        map('gen_ai.operation.name', 'chat')) AS SpanAttributes,
    toUInt64(multiIf(k = 0, 14000000, k IN (2, 3), 4000000, 1000000)) AS Duration,
    if(k = 2 AND g % 10 = 0, 'Error', 'Unset') AS StatusCode,
    '' AS StatusMessage,
    [] AS `Events.Timestamp`, [] AS `Events.Name`, [] AS `Events.Attributes`,
    [] AS `Links.TraceId`, [] AS `Links.SpanId`, [] AS `Links.TraceState`, [] AS `Links.Attributes`
FROM (
    SELECT
        number AS n,
        intDiv(number, 8) AS g,
        number % 8 AS k,
        concat('conv-', toString(intDiv(number, 8) % greatest(1, intDiv({spans:UInt64}, 200)))) AS conversation,
        concat('get_order_', toString(intDiv(number, 8) % 7)) AS read_tool,
        concat('send_email_', toString(intDiv(number, 8) % 3)) AS write_tool
    FROM numbers({spans:UInt64})
)
