-- Findings: one page, newest first.
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
FROM filtered_findings($t0, $t1, $conv, $tools, $statuses)
WHERE len($kinds) = 0 OR list_contains($kinds, kind)
ORDER BY last_seen DESC, kind, conversation_id
LIMIT $limit OFFSET $offset;
