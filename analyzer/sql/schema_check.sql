-- Run before schema.sql: a database written with another schema is refused
-- before anything is added to it.

-- name: meta_table
CREATE TABLE IF NOT EXISTS toolspan_meta (key VARCHAR PRIMARY KEY, value VARCHAR);

-- name: schema_version
SELECT value FROM toolspan_meta WHERE key = 'schema_version';

-- name: write_schema_version
-- Run after schema.sql.
INSERT OR REPLACE INTO toolspan_meta VALUES ('schema_version', ?);
