-- Base tables. Spans are unique by (trace_id, span_id): the ingest statements
-- enforce it with an anti-join, which costs a fraction of a primary-key index
-- on bulk inserts. Files are remembered by (path, size, mtime) so ingesting
-- the same file twice reads nothing.

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

CREATE TABLE IF NOT EXISTS bad_lines (path VARCHAR NOT NULL, line BIGINT NOT NULL, reason VARCHAR NOT NULL);

CREATE TABLE IF NOT EXISTS write_tools (pattern VARCHAR PRIMARY KEY);

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
    -- Every attribute as text; the spans view shows them as a MAP.
    attribute_list STRUCT(key VARCHAR, value VARCHAR)[],
    source_file VARCHAR
);

-- Spans that carry a conversation id (any span, not only tool spans): a tool
-- span without one inherits its trace's conversation.
CREATE TABLE IF NOT EXISTS trace_conversation_rows (
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    conversation_id VARCHAR NOT NULL
);

-- Tool-call and attempt spans of every instrumentation, with the attributes
-- the views need already extracted and the arguments/results fingerprinted
-- (canonical JSON), so analysing an ingested database again is cheap.
CREATE TABLE IF NOT EXISTS tool_span_rows (
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    parent_span_id VARCHAR,
    source VARCHAR NOT NULL,          -- toolspan | genai | openinference | attempt
    tool VARCHAR,
    call_id VARCHAR,
    conversation_attr VARCHAR,
    request_id VARCHAR,
    turn_id VARCHAR,
    side_effect_attr VARCHAR,
    idempotency_key VARCHAR,
    replayed BOOLEAN,
    args_fingerprint VARCHAR,
    arguments VARCHAR,
    result_hash VARCHAR,
    result_fingerprint VARCHAR,
    status_attr VARCHAR,
    error_code VARCHAR,
    retryable BOOLEAN,
    attempts_attr BIGINT,
    total_wait_s DOUBLE,
    retry_after_s DOUBLE,
    retry_initiator VARCHAR,
    attempt BIGINT,
    outcome VARCHAR,
    read_back VARCHAR,
    delay_s DOUBLE,
    elapsed_wait_s DOUBLE,
    error_type VARCHAR,
    http_status BIGINT,
    status_code VARCHAR,
    start_time TIMESTAMP,
    end_time TIMESTAMP,
    duration_ms DOUBLE
);
