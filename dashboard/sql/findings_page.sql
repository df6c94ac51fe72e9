-- name: findings_page
-- Findings: one page, newest first, with the number of findings of each kind
-- that pass the filters (one pass over the findings view).
WITH passing AS MATERIALIZED (
    SELECT * FROM filtered_findings($t0, $t1, $conv, $tools, $statuses)
),
by_kind AS (
    SELECT coalesce(map_from_entries(list((kind, n))), MAP {}) AS counts
    FROM (SELECT kind, count(*) AS n FROM passing GROUP BY kind)
),
page AS (
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
    WHERE len($kinds) = 0 OR list_contains($kinds, kind)
    ORDER BY last_seen DESC, kind, conversation_id
    LIMIT $limit OFFSET $offset
)
-- A LEFT JOIN keeps the counts when the page is empty.
SELECT page.*, by_kind.counts AS kind_counts
FROM by_kind
LEFT JOIN page ON true
ORDER BY page.last_seen DESC, page.kind, page.conversation_id;
