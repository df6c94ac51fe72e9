-- name: filter_bounds
-- Sidebar (filter_bounds.sql on ClickHouse): how much there is, the time
-- range, every tool and status, and the 500 most recently active conversations.
SELECT
    -- Rows in range, as the analyzer counts them on ClickHouse.
    (SELECT count() FROM $source WHERE $range) AS spans,
    (SELECT count() FROM tool_calls) AS calls,
    (SELECT minOrNull(start_time) FROM tool_calls) AS first_call,
    (SELECT maxOrNull(start_time) FROM tool_calls) AS last_call,
    (SELECT arraySort(groupUniqArray(tool)) FROM tool_calls) AS tools,
    (SELECT arraySort(groupUniqArray(status)) FROM tool_calls) AS statuses,
    (
        SELECT arraySort((c, t) -> (-toUnixTimestamp64Micro(t), c), groupArray(conversation_id), groupArray(last_seen))
        FROM (
            SELECT conversation_id, max(start_time) AS last_seen
            FROM tool_calls
            WHERE conversation_id IS NOT NULL
            GROUP BY conversation_id
            ORDER BY last_seen DESC, conversation_id
            LIMIT 500
        )
    ) AS conversations
