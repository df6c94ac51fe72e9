-- name: timeline_count
-- Retry timelines: how many calls the pager covers.
SELECT count(*) AS calls
FROM filtered_calls($t0, $t1, $conv, $tools, $statuses)
WHERE NOT $problem_only OR attempts > 1 OR status <> 'succeeded';
