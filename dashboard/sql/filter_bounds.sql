-- Sidebar: the time range of all tool calls, and how much there is at all.
SELECT
    (SELECT count(*) FROM spans) AS spans,
    count(*) AS calls,
    min(start_time) AS first_call,
    max(start_time) AS last_call
FROM tool_calls;
