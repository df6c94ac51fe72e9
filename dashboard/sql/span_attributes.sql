-- name: span_attributes
-- Trace view: every attribute of one span.
SELECT attributes FROM spans WHERE trace_id = $trace_id AND span_id = $span_id;
