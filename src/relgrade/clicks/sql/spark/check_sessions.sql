-- Spark SQL twin of the session half of ../check_log.sql: the first session (by id)
-- breaking each session rule. Distinct positions and chunks are counted exactly (Spark has no hash shortcut to
-- confirm), one grouped pass.
WITH per_session AS (
    SELECT session_id,
           count(*) AS rows,
           count(DISTINCT position) AS positions,
           count(DISTINCT chunk_id) AS chunks,
           min(query_id) <> max(query_id) AS several_queries,
           min(ranker) <> max(ranker) AS several_rankers
    FROM relgrade_clicks_log
    GROUP BY session_id
)
SELECT count(*) AS sessions,
       min(CASE WHEN positions < rows THEN session_id END) AS repeated_position,
       min(CASE WHEN chunks < rows THEN session_id END) AS repeated_chunk,
       min(CASE WHEN several_queries THEN session_id END) AS several_queries,
       min(CASE WHEN several_rankers THEN session_id END) AS several_rankers
FROM per_session
