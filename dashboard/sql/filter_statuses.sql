-- Sidebar: every final status, for the status filter.
SELECT DISTINCT status FROM tool_calls WHERE status IS NOT NULL ORDER BY status;
