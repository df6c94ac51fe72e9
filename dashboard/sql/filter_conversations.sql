-- Sidebar: the most recently active conversations (more can be typed in).
SELECT conversation_id
FROM conversations
WHERE conversation_id IS NOT NULL
ORDER BY last_seen DESC, conversation_id
LIMIT 500;
