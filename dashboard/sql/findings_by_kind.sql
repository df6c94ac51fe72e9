-- Findings: how many of each kind pass the filters.
SELECT kind, count(*) AS findings, sum(count) AS calls
FROM filtered_findings($t0, $t1, $conv, $tools, $statuses)
GROUP BY kind
ORDER BY kind;
