-- Temporary table macros every page query goes through, so that each page
-- applies the sidebar filters the same way. Created on each cursor (temporary
-- objects live in memory, so they work on the read-only database).
-- An empty list or a NULL bound means "no filter".

-- name: filtered_calls
CREATE OR REPLACE TEMP MACRO filtered_calls(t0, t1, conv, tools, statuses) AS TABLE
SELECT *
FROM tool_calls
WHERE (t0 IS NULL OR start_time >= t0)
  AND (t1 IS NULL OR start_time <= t1)
  AND (conv IS NULL OR conversation_id = conv)
  AND (len(tools) = 0 OR list_contains(tools, tool))
  AND (len(statuses) = 0 OR list_contains(statuses, status));

-- name: filtered_findings
-- Findings overlapping the time range, in the conversation, for one of the
-- tools, and involving at least one call with one of the statuses.
CREATE OR REPLACE TEMP MACRO filtered_findings(t0, t1, conv, tools, statuses) AS TABLE
SELECT f.*
FROM findings AS f
WHERE (t0 IS NULL OR f.last_seen >= t0)
  AND (t1 IS NULL OR f.first_seen <= t1)
  AND (conv IS NULL OR f.conversation_id = conv)
  AND (len(tools) = 0 OR list_contains(tools, f.tool))
  AND (
    len(statuses) = 0
    OR EXISTS (
      SELECT 1
      FROM tool_calls AS c
      WHERE list_contains(f.span_ids, c.span_id)
        AND list_contains(f.trace_ids, c.trace_id)
        AND list_contains(statuses, c.status)
    )
  );
