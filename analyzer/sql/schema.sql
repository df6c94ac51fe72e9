-- Base tables. Spans are unique by (trace_id, span_id): the ingest statements
-- enforce it with an anti-join, which costs a fraction of a primary-key index
-- on bulk inserts. Files are remembered by (path, size, mtime) so ingesting
-- the same file twice reads nothing.

-- name: ingested_files
CREATE TABLE IF NOT EXISTS ingested_files (
    path VARCHAR NOT NULL,
    size BIGINT NOT NULL,
    mtime_ns BIGINT NOT NULL,
    lines BIGINT NOT NULL,
    spans BIGINT NOT NULL,
    bad_lines BIGINT NOT NULL,
    ingested_at TIMESTAMP NOT NULL,
    PRIMARY KEY (path, size, mtime_ns)
);

-- name: bad_lines
CREATE TABLE IF NOT EXISTS bad_lines (path VARCHAR NOT NULL, line BIGINT NOT NULL, reason VARCHAR NOT NULL);

-- name: write_tools
CREATE TABLE IF NOT EXISTS write_tools (pattern VARCHAR PRIMARY KEY);

-- name: span_rows
CREATE TABLE IF NOT EXISTS span_rows (
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    parent_span_id VARCHAR,
    name VARCHAR,
    kind VARCHAR,
    start_time TIMESTAMP,
    end_time TIMESTAMP,
    duration_ms DOUBLE,
    status_code VARCHAR,
    status_message VARCHAR,
    service_name VARCHAR,
    scope_name VARCHAR,
    -- Every attribute as text, in the order of the list of keys its shape
    -- names (attribute_shapes); the spans view shows them as a MAP.
    attribute_shape UBIGINT,
    attribute_vals VARCHAR[],
    source_file VARCHAR,
    -- The first exception event's exception.type, 'exception' when it has
    -- none (read_batch.sql): events are not kept otherwise.
    exception_type VARCHAR,
    -- An execute_tool span's gen_ai.tool.message event content and
    -- gen_ai.choice event message (Strands Agents' arguments and result).
    event_arguments VARCHAR,
    event_result VARCHAR
);

-- name: attribute_shapes
-- Each distinct list of attribute keys once, by its hash: spans hold the hash.
-- A batch holds a handful of lists, where a list per span cost more to store
-- and copy than the attribute texts themselves.
CREATE TABLE IF NOT EXISTS attribute_shapes (shape UBIGINT PRIMARY KEY, keys VARCHAR[] NOT NULL);

-- name: attribute_key_list
-- The same with the names the span statements join on (views.sql, derive.sql).
CREATE OR REPLACE VIEW attribute_key_list AS
SELECT shape AS attribute_shape, keys AS attribute_keys FROM attribute_shapes;

-- name: stored_traces
-- Every trace with spans in span_rows, once: a batch whose traces are all new
-- is stored without reading span_rows (ingest.sql, insert_new_spans).
CREATE TABLE IF NOT EXISTS stored_traces (trace_id VARCHAR NOT NULL);

-- name: pending_traces
-- Traces ingested since tool_call_rows, attempt_rows and finding_rows were
-- last brought up to date: filled with each batch, emptied by the refresh at
-- the end of the ingest (or the next call, if an ingest stopped half way).
CREATE TABLE IF NOT EXISTS pending_traces (trace_id VARCHAR NOT NULL);

-- name: pending_batches
-- Per batch committed since the last refresh: the rowid of its first span in
-- span_rows (span_rows is only ever appended to, so its rowids never move) and
-- whether any of its traces had spans stored before. When none had, the
-- refresh reads only the spans from the first such rowid on (DuckDB skips the
-- row groups before it) and has no old calls to forget: reading every span of
-- the database for the touched traces made each live batch cost more as the
-- database grew. No row (a database pending from an older analyzer): every span.
CREATE TABLE IF NOT EXISTS pending_batches (first_rowid BIGINT NOT NULL, known_traces BOOLEAN NOT NULL);

-- name: finding_scope_conversations
-- The conversations and idempotency keys whose findings a refresh recomputes
-- (findings.sql, toolspan_finding_calls): those of the calls it recomputed,
-- before and after. Empty between refreshes.
CREATE TABLE IF NOT EXISTS finding_scope_conversations (conversation_id VARCHAR);

-- name: finding_scope_keys
CREATE TABLE IF NOT EXISTS finding_scope_keys (idempotency_key VARCHAR);

-- name: tool_call_rows
-- The views' rows, kept up to date at ingest (only the traces an ingest
-- touched are recomputed) so that reading them costs a scan, not a join of
-- every tool span. side_effect depends on write_tools: set_write_tools
-- recomputes it.
CREATE TABLE IF NOT EXISTS tool_call_rows (
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    parent_span_id VARCHAR,
    conversation_id VARCHAR NOT NULL,
    request_id VARCHAR,
    turn_id VARCHAR,
    tool VARCHAR,
    call_id VARCHAR,
    side_effect VARCHAR,
    idempotency_key VARCHAR,
    replayed BOOLEAN NOT NULL,
    args_fingerprint VARCHAR,
    arguments VARCHAR,
    answer VARCHAR,
    result_hash VARCHAR,
    status VARCHAR NOT NULL,
    error_code VARCHAR,
    retryable BOOLEAN,
    attempts BIGINT NOT NULL,
    total_wait_s DOUBLE,
    retry_after_s DOUBLE,
    retry_initiator VARCHAR,
    start_time TIMESTAMP,
    end_time TIMESTAMP,
    duration_ms DOUBLE,
    source VARCHAR NOT NULL,
    side_effect_attr VARCHAR,         -- toolspan.side_effect, for set_write_tools
    read_back VARCHAR,                -- toolspan.read_back of the call span
    resource_key VARCHAR,             -- toolspan.resource.key
    keys_honoured VARCHAR             -- toolspan.tool.keys_honoured, for unverified_keyed_retry
);

-- name: attempt_rows
CREATE TABLE IF NOT EXISTS attempt_rows (
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    call_span_id VARCHAR,
    conversation_id VARCHAR NOT NULL,
    tool VARCHAR,
    attempt BIGINT,
    outcome VARCHAR,
    delay_s DOUBLE,
    elapsed_wait_s DOUBLE,
    error_type VARCHAR,
    http_status BIGINT,
    status_code VARCHAR,
    start_time TIMESTAMP,
    end_time TIMESTAMP,
    duration_ms DOUBLE,
    read_back VARCHAR                 -- toolspan.read_back, for unsafe_retry
);

-- name: finding_rows
-- The findings with the default min_repeats (3), recomputed after an ingest
-- that added spans and after set_write_tools changed the write tools.
CREATE TABLE IF NOT EXISTS finding_rows (
    kind VARCHAR NOT NULL,
    conversation_id VARCHAR,
    tool VARCHAR,
    idempotency_key VARCHAR,
    count BIGINT,
    span_ids VARCHAR[],
    trace_ids VARCHAR[],
    first_seen TIMESTAMP,
    last_seen TIMESTAMP,
    detail VARCHAR
);
