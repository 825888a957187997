-- The exact check, run when check_log.sql flags something: one grouped pass over the log
-- for every row and session rule: how many rows break each
-- row rule (a NULL in the typed view marks a missing or malformed value), and the first
-- session (by id) that breaks each session rule. Counting the row rules inside the session
-- grouping saves a second scan of the log.
-- A session is one result list shown once: one query, one ranker, each position and each
-- chunk at most once. Distinct positions are counted as bits of a 64-bit mask (positions
-- above 64 through a list, which is empty for ordinary logs) and distinct chunks through
-- their 64-bit hashes, which keeps the per-session state small; a repeated hash is
-- confirmed on the session's own rows before it is reported (repeated_chunk_exact.sql).
-- The session rules are read only when no row breaks a row rule. It also counts the rows at
-- a position above 64, which a valid log may have (the caller then reads no patterns).
WITH per_session AS (
    SELECT session_id,
           count(*) AS rows,
           count(*) FILTER (WHERE query_id IS NULL) AS null_query_id,
           count(*) FILTER (WHERE chunk_id IS NULL) AS null_chunk_id,
           count(*) FILTER (WHERE position IS NULL) AS null_position,
           count(*) FILTER (WHERE clicked IS NULL) AS null_clicked,
           count(*) FILTER (WHERE ranker IS NULL) AS null_ranker,
           count(*) FILTER (WHERE randomized IS NULL) AS null_randomized,
           count(*) FILTER (WHERE position > 64) AS deep,
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
SELECT coalesce(sum(rows), 0) AS rows,
       coalesce(sum(rows) FILTER (WHERE session_id IS NULL), 0) AS session_id,
       coalesce(sum(null_query_id), 0) AS query_id,
       coalesce(sum(null_chunk_id), 0) AS chunk_id,
       coalesce(sum(null_position), 0) AS position,
       coalesce(sum(null_clicked), 0) AS clicked,
       coalesce(sum(null_ranker), 0) AS ranker,
       coalesce(sum(null_randomized), 0) AS randomized,
       count(*) AS sessions,
       coalesce(sum(deep), 0) AS deep,
       min(session_id) FILTER (WHERE positions < rows) AS repeated_position,
       min(session_id) FILTER (WHERE chunks < rows) AS repeated_chunk,
       min(session_id) FILTER (WHERE several_queries) AS several_queries,
       min(session_id) FILTER (WHERE several_rankers) AS several_rankers
FROM per_session
