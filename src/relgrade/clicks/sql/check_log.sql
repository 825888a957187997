-- The log's check and the click patterns every estimator needs, in one grouped pass.
-- Rows are grouped by (session, query, ranker): a clean session is one such list, so a
-- session that answers several queries or comes from several rankers shows up as more lists
-- than sessions, without keeping the ids' minimum and maximum per session. Per list: the
-- rows that break a row rule (a NULL in the typed view), the positions shown as a 64-bit
-- mask (positions above 64 are counted apart), the chunks through a list of their 64-bit
-- hashes, and the masks of the clicked, the randomized and the clicked randomized
-- positions. The result is one row: the totals of the check and a histogram of the lists'
-- masks (a few hundred distinct patterns for millions of sessions), from which the
-- randomization estimate and the clicks per position are read without another pass.
-- Anything flagged here is looked at again by check_log_exact.sql, which words the error;
-- a repeated chunk hash is confirmed on the ids there.
WITH lists AS (
    SELECT session_id, query_id, ranker,
           count(*) AS rows,
           count(*) FILTER (WHERE chunk_id IS NULL OR position IS NULL OR clicked IS NULL
                                  OR randomized IS NULL) AS bad,
           count(*) FILTER (WHERE position > 64) AS deep,
           bit_or(CASE WHEN position <= 64
                       THEN CAST(1 AS UBIGINT) << CAST(position - 1 AS UBIGINT) END) AS shown,
           bit_or(CASE WHEN position <= 64 AND clicked = 1
                       THEN CAST(1 AS UBIGINT) << CAST(position - 1 AS UBIGINT) END) AS clicks,
           bit_or(CASE WHEN position <= 64 AND randomized
                       THEN CAST(1 AS UBIGINT) << CAST(position - 1 AS UBIGINT) END) AS flagged,
           bit_or(CASE WHEN position <= 64 AND randomized AND clicked = 1
                       THEN CAST(1 AS UBIGINT) << CAST(position - 1 AS UBIGINT) END) AS flagged_clicks,
           len(list_distinct(list(hash(chunk_id)))) AS chunks
    FROM relgrade_clicks_log
    GROUP BY session_id, query_id, ranker
)
SELECT coalesce(sum(rows), 0) AS rows,
       count(*) AS lists,
       count(DISTINCT session_id) AS sessions,
       coalesce(sum(bad), 0)
         + coalesce(sum(rows) FILTER (WHERE session_id IS NULL OR query_id IS NULL
                                            OR ranker IS NULL), 0) AS bad,
       coalesce(sum(deep), 0) AS deep,
       count(*) FILTER (WHERE coalesce(bit_count(shown), 0) + deep < rows) AS repeated_position,
       count(*) FILTER (WHERE chunks < rows) AS repeated_chunk,
       histogram({'shown': coalesce(shown, 0), 'clicks': coalesce(clicks, 0),
                  'flagged': coalesce(flagged, 0),
                  'flagged_clicks': coalesce(flagged_clicks, 0)}) AS patterns
FROM lists
