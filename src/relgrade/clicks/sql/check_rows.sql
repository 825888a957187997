-- One pass over the log: how many rows break each row rule (a NULL in the typed view
-- marks a missing or malformed value).
SELECT
    count(*) AS rows,
    count(*) FILTER (WHERE session_id IS NULL) AS session_id,
    count(*) FILTER (WHERE query_id IS NULL) AS query_id,
    count(*) FILTER (WHERE chunk_id IS NULL) AS chunk_id,
    count(*) FILTER (WHERE position IS NULL) AS position,
    count(*) FILTER (WHERE clicked IS NULL) AS clicked,
    count(*) FILTER (WHERE ranker IS NULL) AS ranker,
    count(*) FILTER (WHERE randomized IS NULL) AS randomized
FROM relgrade_clicks_log
