-- One pass over the sessions: the first session (by id) that breaks each session rule.
-- A session is one result list shown once: one query, one ranker, each position and each
-- chunk at most once. Distinct positions are counted as bits of a 64-bit mask (positions
-- above 64 through a list, which is empty for ordinary logs) and distinct chunks through
-- their 64-bit hashes, which keeps the per-session state small; a repeated hash is
-- confirmed on the session's own rows before it is reported (repeated_chunk_exact.sql).
WITH per_session AS (
    SELECT session_id,
           count(*) AS rows,
           coalesce(bit_count(bit_or(CASE WHEN position <= 64
                                          THEN CAST(1 AS UBIGINT) << CAST(position - 1 AS UBIGINT)
                                          END)), 0)
             + coalesce(len(list_distinct(list(position) FILTER (WHERE position > 64))), 0)
             AS positions,
           len(list_distinct(list(hash(chunk_id)))) AS chunks,
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
