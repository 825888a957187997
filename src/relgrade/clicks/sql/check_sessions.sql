-- One pass over the sessions: the first session (by id) that breaks each session rule.
-- A session is one result list shown once: one query, one ranker, each position and each
-- chunk at most once.
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
       min(session_id) FILTER (WHERE positions < rows) AS repeated_position,
       min(session_id) FILTER (WHERE chunks < rows) AS repeated_chunk,
       min(session_id) FILTER (WHERE several_queries) AS several_queries,
       min(session_id) FILTER (WHERE several_rankers) AS several_rankers
FROM per_session
