-- Every row of one session, in position order, for an error message about that session.
SELECT position, chunk_id, query_id, ranker, clicked, randomized
FROM relgrade_clicks_log
WHERE session_id = $session_id
ORDER BY position, chunk_id
