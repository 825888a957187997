-- Spark SQL twin of the row half of ../check_log.sql: rows breaking each row rule.
SELECT
    count(*) AS rows,
    count_if(session_id IS NULL) AS session_id,
    count_if(query_id IS NULL) AS query_id,
    count_if(chunk_id IS NULL) AS chunk_id,
    count_if(position IS NULL) AS position,
    count_if(clicked IS NULL) AS clicked,
    count_if(ranker IS NULL) AS ranker,
    count_if(randomized IS NULL) AS randomized
FROM relgrade_clicks_log
