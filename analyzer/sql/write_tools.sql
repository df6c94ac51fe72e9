-- The tools the user names as writes (names or glob patterns), see
-- Analyzer.set_write_tools and toolspan_side_effect (derive.sql).

-- name: list_write_tools
SELECT pattern FROM write_tools ORDER BY pattern;

-- name: forget_write_tools
DELETE FROM write_tools;

-- name: add_write_tool
INSERT INTO write_tools VALUES (?);
