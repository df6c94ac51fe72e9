-- name: filter_bounds
-- Sidebar, in one pass over tool_calls (a view the analyzer computes on each
-- read): how much there is, the time range, every tool and status, and the
-- 500 most recently active conversations (more can be typed in).
WITH calls AS MATERIALIZED (
    SELECT conversation_id, tool, status, start_time FROM tool_calls
)
SELECT
    (SELECT count(*) FROM spans) AS spans,
    (SELECT count(*) FROM calls) AS calls,
    (SELECT min(start_time) FROM calls) AS first_call,
    (SELECT max(start_time) FROM calls) AS last_call,
    (SELECT coalesce(list(DISTINCT tool ORDER BY tool), []) FROM calls WHERE tool IS NOT NULL)
        AS tools,
    (SELECT coalesce(list(DISTINCT status ORDER BY status), []) FROM calls
        WHERE status IS NOT NULL) AS statuses,
    (
        SELECT coalesce(list(conversation_id ORDER BY last_seen DESC, conversation_id), [])
        FROM (
            SELECT conversation_id, max(start_time) AS last_seen
            FROM calls
            WHERE conversation_id IS NOT NULL
            GROUP BY conversation_id
            ORDER BY last_seen DESC, conversation_id
            LIMIT 500
        )
    ) AS conversations;
