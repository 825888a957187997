-- The first session (by id) that shows one chunk twice, compared as text: run only when
-- check_log.sql's hash comparison flagged a session whose rows hold no repeat (two
-- chunk ids with the same 64-bit hash).
SELECT min(session_id)
FROM (
    SELECT session_id, count(*) AS rows, len(list_distinct(list(chunk_id))) AS chunks
    FROM relgrade_clicks_log
    GROUP BY session_id
)
WHERE chunks < rows
