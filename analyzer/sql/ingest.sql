-- The ingest of one batch: the files are read into a temporary stage table,
-- checked, deduplicated, then appended to span_rows; ingested_files and
-- bad_lines remember what was read.

-- name: create_stage
-- The stage's columns come from the read itself: the typed read of the batch
-- makes it, or of an empty file when the batch is read in parts.
CREATE OR REPLACE TEMP TABLE stage AS SELECT * FROM _read_batch(?);

-- name: insert_stage
INSERT INTO stage SELECT * FROM _read_batch(?);

-- name: insert_bundle_stage
-- A bundle of small files (one file) and the names of the files in it.
INSERT INTO stage SELECT * FROM _read_batch(?, bundled := ?::VARCHAR[]);

-- name: insert_slow_stage
-- A file read again (its ids are not all lowercase hex), a good-lines copy, a
-- line alone: ids lowercased, every span with its own key list.
INSERT INTO stage SELECT * FROM _read_batch(?, slow := true);

-- name: insert_long_lines_stage
-- A good-lines copy with a line longer than the default read buffer.
INSERT INTO stage SELECT * FROM _read_batch(?, object_size := ?, slow := true);

-- name: unstage_file
DELETE FROM stage WHERE source_file = ?;

-- name: rename_staged_file
-- Lines read from a good-lines copy are credited to the original file.
UPDATE stage SET source_file = ? WHERE source_file = ?;

-- name: drop_stage
DROP TABLE IF EXISTS stage;

-- name: drop_batch_traces
DROP TABLE IF EXISTS batch_traces;

-- name: check_stage_macro
-- Per file of the stage (of the files given, or of all when NULL), when
-- something is wrong: to_lowercase, an id is not lowercase hex (the file is
-- read again with its ids lowercased, then checked again); suspect, a span
-- lacks a valid trace or span id, has an attribute without a key or the same
-- key twice, or a time out of range (re-read line by line to report the exact
-- lines and spans).
-- The keys are checked once per distinct list of keys (attribute_key_lists),
-- not per span: a batch holds a handful of key lists, and list_unique on every
-- span cost more than this whole statement (bench/analyzer_bench.py).
CREATE OR REPLACE TEMP MACRO toolspan_check_stage(files) AS TABLE
WITH span_check AS (
    SELECT
        source_file,
        bool_and(
            toolspan_span_ok(trace_id, span_id, true, true)
            AND (parent_span_id IS NULL OR parent_span_id = lower(parent_span_id))) AS ids_ok,
        bool_and(coalesce(times_ok, false)) AS times_ok
    FROM stage
    WHERE has_span AND (files IS NULL OR list_contains(files, source_file))
    GROUP BY source_file
),
key_check AS (
    SELECT source_file, bool_and(toolspan_keys_ok(keys)) AS keys_ok
    FROM (
        SELECT source_file, unnest(attribute_key_lists) AS keys
        FROM stage
        WHERE attribute_key_lists IS NOT NULL AND (files IS NULL OR list_contains(files, source_file))
    )
    GROUP BY source_file
)
SELECT
    source_file,
    NOT coalesce(ids_ok, true) AS to_lowercase,
    NOT (coalesce(ids_ok, true) AND coalesce(times_ok, true) AND coalesce(keys_ok, true)) AS suspect
FROM span_check
FULL JOIN key_check USING (source_file)
WHERE NOT (coalesce(ids_ok, true) AND coalesce(times_ok, true) AND coalesce(keys_ok, true));

-- name: check_stage
SELECT source_file, to_lowercase, suspect FROM toolspan_check_stage(NULL);

-- name: check_staged_files
-- The same, for the files read again with their ids lowercased.
SELECT source_file, to_lowercase, suspect FROM toolspan_check_stage(?::VARCHAR[]);

-- name: span_ok_macro
-- The checks of the typed read that the line checker (_inputs.py) repeats.
-- Ids: 32 and 16 bytes, all lowercase hex, in one match of both ids (a match
-- per id cost a fifth more).
CREATE OR REPLACE TEMP MACRO toolspan_span_ok(trace_id, span_id, keys_ok, times_ok) AS
    coalesce(
        strlen(trace_id) = 32 AND strlen(span_id) = 16
            AND regexp_full_match(trace_id || span_id, '[0-9a-f]{48}'),
        false)
    AND keys_ok
    AND coalesce(times_ok, false);

-- name: keys_ok_macro
-- False when an attribute key is NULL or repeated (list_unique counts the
-- distinct non-NULL keys); true for a span without attributes.
CREATE OR REPLACE TEMP MACRO toolspan_keys_ok(keys) AS
    list_unique(keys) IS NOT DISTINCT FROM len(keys);

-- name: staged_spans_macro
-- The batch's spans as span_rows stores them (both inserts below select them).
CREATE OR REPLACE TEMP MACRO toolspan_staged_spans() AS TABLE
SELECT
    trace_id, span_id, parent_span_id, name, kind,
    make_timestamp(start_ns // 1000) AS start_time,
    make_timestamp(end_ns // 1000) AS end_time,
    -- HUGEINT: the difference of two valid BIGINT times can overflow a BIGINT.
    (end_ns::HUGEINT - start_ns) / 1e6 AS duration_ms,
    status_code, status_message, service_name, scope_name, attribute_shape, attribute_vals,
    source_file, exception_type, event_arguments, event_result
FROM stage
WHERE has_span;

-- name: unstage_bad_spans
-- The invalid spans of a line staged unchecked (too deeply nested for the line
-- checker; read with slow := true, so each row holds its own key list);
-- returns how many were removed.
DELETE FROM stage
WHERE source_file = ? AND has_span
  AND NOT toolspan_span_ok(trace_id, span_id, toolspan_keys_ok(attribute_key_lists[1]), times_ok)
RETURNING 1;

-- name: file_counts
SELECT source_file, count(*) FILTER (WHERE first_of_line) AS lines, count(*) FILTER (WHERE has_span) AS spans
FROM stage
GROUP BY source_file;

-- name: duplicate_spans
-- Whether spans may be present twice in the batch (e.g. a file and its .gz
-- copy): counting distinct hashes of the ids costs half of counting the ids.
-- Two spans whose hashes collide only make deduplicate_stage run for nothing.
SELECT count(*) - count(DISTINCT hash(trace_id, span_id)) FROM stage WHERE has_span;

-- name: deduplicate_stage
-- After remember_attribute_shapes: a row removed here may hold key lists.
CREATE OR REPLACE TEMP TABLE stage AS
SELECT * FROM stage
WHERE has_span
QUALIFY row_number() OVER (PARTITION BY trace_id, span_id ORDER BY source_file) = 1;

-- name: batch_traces
-- The batch's traces, once (after deduplicate_stage): the statements below
-- read them several times, and each DISTINCT over the stage cost ~0.03 CPU s
-- per 1M spans.
CREATE OR REPLACE TEMP TABLE batch_traces AS
SELECT DISTINCT trace_id FROM stage WHERE has_span;

-- name: remember_pending_batch
-- The rowid the batch's spans start from in span_rows, and whether any of its
-- traces had spans stored before (schema.sql, pending_batches).
INSERT INTO pending_batches VALUES (?, ?);

-- name: remember_pending_traces
-- The batch's traces: their tool calls are recomputed after the batch commits
-- (derive.sql). Recomputing inside the batch's transaction costs far more.
INSERT INTO pending_traces
SELECT trace_id FROM batch_traces;

-- name: shape_collisions
-- Key lists of the batch whose hash is that of another list (of the batch or
-- stored): a shape must name one list. DuckDB's 64-bit hash makes this about
-- as likely as two random 64-bit numbers being equal, but it is checked.
WITH batch_keys AS (
    SELECT DISTINCT keys
    FROM (SELECT unnest(attribute_key_lists) AS keys FROM stage WHERE attribute_key_lists IS NOT NULL)
    WHERE keys IS NOT NULL
),
every_list AS (
    SELECT hash(keys) AS shape, keys FROM batch_keys
    UNION
    SELECT shape, keys FROM attribute_shapes
)
SELECT shape FROM every_list GROUP BY shape HAVING count(*) > 1;

-- name: remember_attribute_shapes
INSERT INTO attribute_shapes
SELECT DISTINCT hash(keys) AS shape, keys
FROM (SELECT unnest(attribute_key_lists) AS keys FROM stage WHERE attribute_key_lists IS NOT NULL)
WHERE keys IS NOT NULL AND hash(keys) NOT IN (SELECT shape FROM attribute_shapes);

-- name: count_known_traces
-- How many of the batch's traces have spans stored already: only spans of
-- those can be stored already.
SELECT count(*) FROM batch_traces SEMI JOIN stored_traces USING (trace_id);

-- name: insert_new_spans
-- The batch's spans when none of its traces is stored yet (the usual case):
-- no span can be there already, so span_rows is not read at all.
INSERT INTO span_rows SELECT * FROM toolspan_staged_spans();

-- name: insert_spans
-- The batch's spans not stored already, when some of its traces are. An ANTI
-- JOIN against the stored spans of those traces only: streaming every stored
-- span past the batch each time made 4M spans into a file cost 11 CPU s here,
-- growing with the square of the input (and NOT EXISTS hashed every stored span).
INSERT INTO span_rows
WITH known AS (
    SELECT trace_id FROM batch_traces
    INTERSECT
    SELECT trace_id FROM stored_traces
),
stored AS (
    SELECT trace_id, span_id FROM span_rows SEMI JOIN known USING (trace_id)
)
SELECT s.*
FROM toolspan_staged_spans() AS s
ANTI JOIN stored AS r USING (trace_id, span_id);

-- name: remember_stored_traces
INSERT INTO stored_traces
SELECT trace_id FROM batch_traces
EXCEPT
SELECT trace_id FROM stored_traces;

-- name: remember_new_stored_traces
-- The same when none of the batch's traces is stored (count_known_traces):
-- nothing to take away, and the EXCEPT hashed every stored trace each batch.
INSERT INTO stored_traces
SELECT trace_id FROM batch_traces;

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
