-- The fake payment service's ledger, shared by every worker process. The
-- service writes it with its own transactions; the test reads it to count
-- real side effects. Loaded by name (see fake_service.py).

-- name: schema
CREATE TABLE IF NOT EXISTS charge (
    charge_id       TEXT PRIMARY KEY,
    order_id        TEXT NOT NULL,
    amount          INTEGER NOT NULL,
    idempotency_key TEXT UNIQUE  -- NULL for the legacy API, which ignores keys
);
CREATE INDEX IF NOT EXISTS charge_order ON charge (order_id);
-- Every request that reached the service, whatever happened to it: the
-- wire tap the test counts executions with.
CREATE TABLE IF NOT EXISTS request (
    seq      INTEGER PRIMARY KEY,
    kind     TEXT NOT NULL CHECK (kind IN ('charge', 'status')),
    order_id TEXT NOT NULL,
    amount   INTEGER NOT NULL,
    attempt  INTEGER NOT NULL,  -- 1-based, per order, charges only (0 for status)
    fault    TEXT NOT NULL,
    pid      INTEGER NOT NULL
);

-- name: count_charge_requests
SELECT count(*) FROM request WHERE kind = 'charge' AND order_id = :order_id;

-- name: log_request
INSERT INTO request (kind, order_id, amount, attempt, fault, pid)
VALUES (:kind, :order_id, :amount, :attempt, :fault, :pid);

-- name: charge_by_key
SELECT charge_id, order_id, amount FROM charge WHERE idempotency_key = :key;

-- name: charge_by_order
SELECT charge_id, order_id, amount FROM charge WHERE order_id = :order_id ORDER BY charge_id
LIMIT 1;

-- name: insert_charge
INSERT INTO charge (charge_id, order_id, amount, idempotency_key)
VALUES (:charge_id, :order_id, :amount, :key);

-- name: charges
SELECT charge_id, order_id, amount FROM charge ORDER BY order_id, charge_id;

-- name: requests_by_fault
SELECT kind, fault, count(*) FROM request GROUP BY kind, fault ORDER BY kind, fault;

-- name: charge_request_amounts
SELECT DISTINCT order_id, amount FROM request WHERE kind = 'charge';

-- name: charge_requests_of_order
SELECT attempt, fault, pid FROM request
WHERE kind = 'charge' AND order_id = :order_id ORDER BY attempt;

-- name: charged_orders
SELECT count(DISTINCT order_id) FROM charge;
