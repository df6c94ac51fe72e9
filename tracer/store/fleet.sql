-- Statements of the SQLite fleet state (retry budgets, circuit breakers), loaded by
-- name. They live in the idempotency store's file, in tables of their own. Times are
-- epoch seconds from the store's clock; a window ending at :now holds the events with
-- :now - window_s < at <= :now.

-- name: no_commit_fsync
-- In WAL mode, NORMAL syncs at checkpoints only: window counters need no fsync per commit.
PRAGMA synchronous=NORMAL;

-- name: begin
BEGIN IMMEDIATE;

-- name: commit
COMMIT;

-- name: rollback
ROLLBACK;

-- name: create_events
CREATE TABLE IF NOT EXISTS fleet_event (
    service TEXT NOT NULL,
    kind    TEXT NOT NULL CHECK (kind IN ('first', 'retry', 'call')),
    at      REAL NOT NULL,
    failed  INTEGER NOT NULL DEFAULT 0
);

-- name: create_events_index
CREATE INDEX IF NOT EXISTS fleet_event_window ON fleet_event (service, kind, at);

-- name: create_breakers
CREATE TABLE IF NOT EXISTS fleet_breaker (
    service    TEXT PRIMARY KEY,
    state      TEXT NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    open_until REAL NOT NULL,
    generation INTEGER NOT NULL
) WITHOUT ROWID;

-- name: create_probes
CREATE TABLE IF NOT EXISTS fleet_probe (
    service TEXT NOT NULL,
    token   TEXT NOT NULL,
    until   REAL NOT NULL,
    PRIMARY KEY (service, token)
) WITHOUT ROWID;

-- name: create_counts
-- Running totals of each window (events in fleet_event), so that reading a window
-- costs the events that left it, not every event in it.
CREATE TABLE IF NOT EXISTS fleet_count (
    service TEXT NOT NULL,
    kind    TEXT NOT NULL,
    events  INTEGER NOT NULL,
    failed  INTEGER NOT NULL,
    PRIMARY KEY (service, kind)
) WITHOUT ROWID;

-- name: expired_events
SELECT count(*), coalesce(sum(failed), 0) FROM fleet_event
WHERE service = :service AND kind = :kind AND at <= :before;

-- name: trim_events
DELETE FROM fleet_event WHERE service = :service AND kind = :kind AND at <= :before;

-- name: uncount_events
UPDATE fleet_count SET events = events - :events, failed = failed - :failed
WHERE service = :service AND kind = :kind;

-- name: count_events
SELECT events, failed FROM fleet_count WHERE service = :service AND kind = :kind;

-- name: add_event
INSERT INTO fleet_event (service, kind, at, failed) VALUES (:service, :kind, :at, :failed);

-- name: count_event
INSERT INTO fleet_count (service, kind, events, failed) VALUES (:service, :kind, 1, :failed)
ON CONFLICT (service, kind) DO UPDATE SET events = events + 1, failed = failed + excluded.failed;

-- name: forget_window
DELETE FROM fleet_event WHERE service = :service AND kind = :kind;

-- name: forget_count
DELETE FROM fleet_count WHERE service = :service AND kind = :kind;

-- name: clear_calls
DELETE FROM fleet_event WHERE service = :service AND kind = 'call';

-- name: clear_call_count
DELETE FROM fleet_count WHERE service = :service AND kind = 'call';

-- name: load_breaker
SELECT state, open_until, generation FROM fleet_breaker WHERE service = :service;

-- name: save_breaker
INSERT OR REPLACE INTO fleet_breaker (service, state, open_until, generation)
VALUES (:service, :state, :open_until, :generation);

-- name: trim_probes
-- A lease ending after :latest was taken before the clock stepped back: it is over too.
DELETE FROM fleet_probe WHERE service = :service AND (until <= :now OR until > :latest);

-- name: count_probes
SELECT count(*) FROM fleet_probe WHERE service = :service;

-- name: add_probe
INSERT INTO fleet_probe (service, token, until) VALUES (:service, :token, :until);

-- name: drop_probe
DELETE FROM fleet_probe WHERE service = :service AND token = :token;

-- name: clear_probes
DELETE FROM fleet_probe WHERE service = :service;
