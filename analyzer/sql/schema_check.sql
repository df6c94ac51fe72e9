-- Run before schema.sql: a database written with another schema is refused
-- before anything is added to it.

-- name: meta_table
CREATE TABLE IF NOT EXISTS toolspan_meta (key VARCHAR PRIMARY KEY, value VARCHAR);

-- name: schema_version
SELECT value FROM toolspan_meta WHERE key = 'schema_version';
