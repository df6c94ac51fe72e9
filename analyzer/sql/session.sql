-- Statements about the connection itself: its settings and transactions.

-- name: settings
-- Row order is never relied on (every ordered result says ORDER BY); not
-- keeping it lets DuckDB scan and insert in parallel with less memory.
SET preserve_insertion_order = false;

-- name: begin
BEGIN TRANSACTION;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: spilled_bytes
-- What DuckDB holds in its temp directory now: for an in-memory database, its
-- own blocks once it outgrew the memory limit.
SELECT coalesce(sum(temporary_storage_bytes), 0) FROM duckdb_memory();

-- name: checkpoint
-- Merges the write-ahead log into the database file, so that the file alone
-- holds everything (toolspan serve copies it for the dashboard).
CHECKPOINT;

-- name: defer_checkpoints
-- Commits append to the write-ahead log and a checkpoint waits until the log
-- passes 256 MB or CHECKPOINT is called. DuckDB's default (16 MB) checkpoints
-- after nearly every commit of a caller that ingests many small batches
-- (toolspan serve): 30% of its ingest time.
SET checkpoint_threshold = '256MB';
