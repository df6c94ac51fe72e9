-- Statements of SQLiteStore, loaded by name. Times are wall-clock epoch seconds
-- from the store's clock; a row counts as absent from forget_at on.

-- name: wal_mode
PRAGMA journal_mode=WAL;

-- name: full_sync
-- fsync the WAL on every commit: a completed key survives a power cut, not only a
-- crash of the process (NORMAL would lose the last commits on power loss).
PRAGMA synchronous=FULL;

-- name: schema_version
-- 0 for a new file; the schema statement sets it.
PRAGMA user_version;

-- name: begin
-- Takes the write lock up front: read-decide-write never interleaves.
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: schema
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS idempotency_record (
    key         TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    token       TEXT,
    lease_until REAL NOT NULL,
    forget_at   REAL NOT NULL,
    result      BLOB
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_record_forget_at ON idempotency_record (forget_at);
CREATE TABLE IF NOT EXISTS guard_state (
    name      TEXT PRIMARY KEY,
    kind      TEXT NOT NULL CHECK (kind IN ('counter', 'answer', 'value')),
    text      TEXT NOT NULL,
    count     INTEGER NOT NULL,
    forget_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS guard_state_forget_at ON guard_state (forget_at);
PRAGMA user_version = 1;
COMMIT;

-- name: load_record
SELECT fingerprint, state, token, lease_until, forget_at, result
FROM idempotency_record
WHERE key = :key;

-- name: save_record
INSERT OR REPLACE INTO idempotency_record
    (key, fingerprint, state, token, lease_until, forget_at, result)
VALUES (:key, :fingerprint, :state, :token, :lease_until, :forget_at, :result);

-- name: drop_record
DELETE FROM idempotency_record WHERE key = :key;

-- name: load_guard
SELECT kind, text, count, forget_at FROM guard_state WHERE name = :name;

-- name: save_guard
INSERT OR REPLACE INTO guard_state (name, kind, text, count, forget_at)
VALUES (:name, :kind, :text, :count, :forget_at);

-- name: drop_guard
DELETE FROM guard_state WHERE name = :name;

-- name: purge_records
DELETE FROM idempotency_record WHERE forget_at <= :now;

-- name: purge_guards
DELETE FROM guard_state WHERE forget_at <= :now;
