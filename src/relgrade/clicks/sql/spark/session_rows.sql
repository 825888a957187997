-- Spark SQL twin of ../session_rows.sql: one session's rows, for an error message.
SELECT position, chunk_id, query_id, ranker, clicked, randomized
FROM relgrade_clicks_log
WHERE session_id = :session_id
ORDER BY position, chunk_id
