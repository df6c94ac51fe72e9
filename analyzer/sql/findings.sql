-- name: placeholder
SELECT 1
