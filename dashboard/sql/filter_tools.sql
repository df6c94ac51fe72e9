-- Sidebar: every tool name, for the tool filter.
SELECT DISTINCT tool FROM tool_calls WHERE tool IS NOT NULL ORDER BY tool;
