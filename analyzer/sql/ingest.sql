-- The ingest of one batch: the files are read into a temporary stage table,
-- checked, deduplicated, then appended to span_rows; ingested_files and
-- bad_lines remember what was read.

-- name: create_stage
-- The stage's columns come from the read itself (an empty file binds them).
CREATE OR REPLACE TEMP TABLE stage AS SELECT * FROM _read_batch(?);

-- name: insert_stage
INSERT INTO stage SELECT * FROM _read_batch(?);

-- name: unstage_file
DELETE FROM stage WHERE source_file = ?;

-- name: rename_staged_file
-- Lines read from a good-lines copy are credited to the original file.
UPDATE stage SET source_file = ? WHERE source_file = ?;

-- name: drop_stage
DROP TABLE IF EXISTS stage;

-- name: suspect_files
-- Files whose spans lack a valid trace or span id, or have an attribute without
-- a key or the same key twice: re-read line by line to report the exact lines.
SELECT DISTINCT source_file
FROM stage
WHERE has_span
  AND NOT (coalesce(regexp_full_match(trace_id, '[0-9a-f]{32}'), false)
           AND coalesce(regexp_full_match(span_id, '[0-9a-f]{16}'), false)
           AND attribute_keys_ok);

-- name: file_counts
SELECT source_file, count(*) FILTER (WHERE first_of_line) AS lines, count(*) FILTER (WHERE has_span) AS spans
FROM stage
GROUP BY source_file;

-- name: duplicate_spans
-- Spans present twice in the batch (e.g. a file and its .gz copy).
SELECT count(*) - count(DISTINCT (trace_id, span_id)) FROM stage WHERE has_span;

-- name: deduplicate_stage
CREATE OR REPLACE TEMP TABLE stage AS
SELECT * FROM stage
WHERE has_span
QUALIFY row_number() OVER (PARTITION BY trace_id, span_id ORDER BY source_file) = 1;

-- name: remember_pending_traces
-- The batch's traces: their tool calls are recomputed after the batch commits
-- (derive.sql). Recomputing inside the batch's transaction costs far more.
INSERT INTO pending_traces
SELECT DISTINCT trace_id FROM stage WHERE has_span;

-- name: insert_spans
INSERT INTO span_rows
SELECT
    trace_id, span_id, parent_span_id, name, kind,
    make_timestamp(start_ns // 1000) AS start_time,
    make_timestamp(end_ns // 1000) AS end_time,
    (end_ns - start_ns) / 1e6 AS duration_ms,
    status_code, status_message, service_name, scope_name, attribute_kv, source_file
FROM stage AS s
WHERE has_span
  AND NOT EXISTS (SELECT 1 FROM span_rows AS r WHERE r.trace_id = s.trace_id AND r.span_id = s.span_id);

-- name: is_ingested
SELECT count(*) FROM ingested_files WHERE path = ? AND size = ? AND mtime_ns = ?;

-- name: remember_file
INSERT OR REPLACE INTO ingested_files VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: remember_bad_line
INSERT INTO bad_lines VALUES (?, ?, ?);

-- name: count_spans
SELECT count(*) FROM span_rows;

-- name: count_pending_traces
SELECT count(*) FROM pending_traces;
