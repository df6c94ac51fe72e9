-- name: timeline_count
-- Retry timelines: how many calls the pager covers (timeline_count.sql on ClickHouse).
SELECT count() AS calls
FROM ($filtered_calls)
WHERE NOT {problem_only:Bool} OR attempts > 1 OR status <> 'succeeded'
