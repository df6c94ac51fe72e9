-- The ingest of one batch: the files are read into a temporary stage table,
-- checked, deduplicated, then appended to span_rows; ingested_files and
-- bad_lines remember what was read.

-- name: create_stage
-- The stage's columns come from the read itself (an empty file binds them).
CREATE OR REPLACE TEMP TABLE stage AS SELECT * FROM _read_batch(?);

-- name: insert_stage
INSERT INTO stage SELECT * FROM _read_batch(?);

-- name: insert_bundle_stage
-- A bundle of small files (one file) and the names of the files in it.
INSERT INTO stage SELECT * FROM _read_batch(?, bundled := ?::VARCHAR[]);

-- name: insert_long_lines_stage
-- A good-lines copy with a line longer than the default read buffer.
INSERT INTO stage SELECT * FROM _read_batch(?, object_size := ?);

-- name: unstage_file
DELETE FROM stage WHERE source_file = ?;

-- name: rename_staged_file
-- Lines read from a good-lines copy are credited to the original file.
UPDATE stage SET source_file = ? WHERE source_file = ?;

-- name: drop_stage
DROP TABLE IF EXISTS stage;

-- name: suspect_files
-- Files whose spans lack a valid trace or span id, have an attribute without
-- a key or the same key twice, or a time out of range: re-read line by line to
-- report the exact lines and spans.
-- The keys are checked once per distinct list of keys in a file, not per span
-- in the typed read: a batch holds a handful of key lists, and list_unique on
-- every span cost more than this whole statement (bench/analyzer_bench.py).
SELECT DISTINCT source_file
FROM (
    SELECT
        source_file,
        attribute_kv.keys AS keys,
        bool_and(toolspan_span_ok(trace_id, span_id, true, times_ok)) AS spans_ok
    FROM stage
    WHERE has_span
    GROUP BY source_file, keys
)
WHERE NOT (spans_ok AND toolspan_keys_ok(keys));

-- name: span_ok_macro
-- The checks of the typed read that the line checker (_inputs.py) repeats.
CREATE OR REPLACE TEMP MACRO toolspan_span_ok(trace_id, span_id, keys_ok, times_ok) AS
    coalesce(regexp_full_match(trace_id, '[0-9a-f]{32}'), false)
    AND coalesce(regexp_full_match(span_id, '[0-9a-f]{16}'), false)
    AND keys_ok
    AND coalesce(times_ok, false);

-- name: keys_ok_macro
-- False when an attribute key is NULL or repeated (list_unique counts the
-- distinct non-NULL keys); true for a span without attributes.
CREATE OR REPLACE TEMP MACRO toolspan_keys_ok(keys) AS
    list_unique(keys) IS NOT DISTINCT FROM len(keys);

-- name: unstage_bad_spans
-- The invalid spans of a line staged unchecked (too deeply nested for the line
-- checker); returns how many were removed.
DELETE FROM stage
WHERE source_file = ? AND has_span
  AND NOT toolspan_span_ok(trace_id, span_id, toolspan_keys_ok(attribute_kv.keys), times_ok)
RETURNING 1;

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
    -- HUGEINT: the difference of two valid BIGINT times can overflow a BIGINT.
    (end_ns::HUGEINT - start_ns) / 1e6 AS duration_ms,
    status_code, status_message, service_name, scope_name, attribute_kv, source_file
-- An ANTI JOIN, not NOT EXISTS: DuckDB hashes the stage (one batch) and
-- streams span_rows past it, where NOT EXISTS hashed every stored span, so each
-- batch cost memory and time growing with the database.
FROM stage AS s
ANTI JOIN span_rows AS r USING (trace_id, span_id)
WHERE has_span;

-- Files go in and out as parallel lists, one statement for all of them: one
-- statement per file made 10,000 small files take 20 s.

-- name: ingested_among
-- Which of the files (lists of path, size, mtime_ns) are ingested already.
SELECT path
FROM (SELECT unnest(?::VARCHAR[]) AS path, unnest(?::BIGINT[]) AS size, unnest(?::BIGINT[]) AS mtime_ns)
JOIN ingested_files USING (path, size, mtime_ns);

-- name: remember_files
-- Lists of path, size, mtime_ns, lines, spans, bad lines; then the time.
INSERT OR REPLACE INTO ingested_files
SELECT unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::BIGINT[]), unnest(?::BIGINT[]),
       unnest(?::BIGINT[]), unnest(?::BIGINT[]), ?;

-- name: remember_bad_lines
-- Lists of path, line, reason.
INSERT INTO bad_lines SELECT unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::VARCHAR[]);

-- name: count_spans
SELECT count(*) FROM span_rows;

-- name: count_pending_traces
SELECT count(*) FROM pending_traces;
