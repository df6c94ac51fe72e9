-- name: findings_page
-- Findings (findings_page.sql on ClickHouse): one page, newest first, with the
-- number of findings of each kind that pass the filters. A LEFT JOIN keeps the
-- counts when the page is empty.
WITH passing AS ($filtered_findings)
SELECT page.*, by_kind.counts AS kind_counts
FROM (
    SELECT CAST((groupArray(kind), groupArray(n)), 'Map(String, UInt64)') AS counts
    FROM (SELECT kind, count() AS n FROM passing GROUP BY kind)
) AS by_kind
LEFT JOIN (
    SELECT
        kind,
        conversation_id,
        tool,
        idempotency_key,
        count,
        first_seen,
        last_seen,
        detail,
        span_ids,
        trace_ids
    FROM passing
    WHERE empty({kinds:Array(String)}) OR has({kinds:Array(String)}, kind)
    ORDER BY last_seen DESC, kind, conversation_id
    LIMIT {limit:UInt64} OFFSET {offset:UInt64}
) AS page ON true
ORDER BY page.last_seen DESC NULLS LAST, page.kind, page.conversation_id
