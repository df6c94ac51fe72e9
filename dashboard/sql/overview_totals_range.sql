-- Overview: the time span of the filtered calls, to size the over-time buckets.
SELECT min(start_time) AS first, max(start_time) AS last
FROM filtered_calls($t0, $t1, $conv, $tools, $statuses);
