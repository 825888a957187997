-- The log's check and the click patterns every estimator needs, in one grouped pass.
-- Rows are grouped by (session, query, ranker): a clean session is one such list, so a
-- session that answers several queries or comes from several rankers shows up as more lists
-- than sessions, without keeping the ids' minimum and maximum per session. Per list: the
-- rows that break a row rule (a NULL in the typed view), the positions shown as a 64-bit
-- mask (positions above 64 are counted apart), the masks of the clicked, the randomized
-- and the clicked randomized positions, and what tells whether a chunk is shown twice.
-- That last test is exact and mostly cheap: three 64-bit masks each set one bit per row,
-- chosen by six bits of the chunk id's 64-bit hash (bits 0-5, 6-11, 12-17); when one mask
-- has as many bits as the list has rows, the hashes differ and so do the chunks. Only the
-- other lists (about 14% of ten-row lists) count their distinct hashes, kept as the hash's
-- upper 32 bits to halve the list's memory (a collision there only sends the log to the
-- exact pass, which compares the ids).
-- The result is one row: the totals of the check and a histogram of the lists' masks (a
-- few hundred distinct patterns for millions of sessions), from which the randomization
-- estimate and the clicks per position are read without another pass. Anything flagged
-- here is looked at again by check_log_exact.sql, which words the error; a repeated chunk
-- hash is confirmed on the ids there.
WITH typed AS (
    SELECT session_id, query_id, ranker, chunk_id, position, clicked, randomized,
           CASE WHEN position <= 64 THEN CAST(1 AS UBIGINT) << CAST(position - 1 AS UBIGINT)
                ELSE CAST(0 AS UBIGINT) END AS bit,
           hash(chunk_id) AS chunk_hash
    FROM relgrade_clicks_log
), lists AS (
    SELECT session_id, query_id, ranker,
           count(*) AS rows,
           count(*) FILTER (WHERE chunk_id IS NULL OR position IS NULL OR clicked IS NULL
                                  OR randomized IS NULL) AS bad,
           count(*) FILTER (WHERE position > 64) AS deep,
           bit_or(bit) AS shown,
           bit_or(bit * CAST(clicked AS UBIGINT)) AS clicks,
           bit_or(bit * CAST(randomized AS UBIGINT)) AS flagged,
           bit_or(bit * CAST(clicked AS UBIGINT) * CAST(randomized AS UBIGINT))
             AS flagged_clicks,
           bit_or(CAST(1 AS UBIGINT) << (chunk_hash & 63)) AS chunk_bits_0,
           bit_or(CAST(1 AS UBIGINT) << ((chunk_hash >> 6) & 63)) AS chunk_bits_1,
           bit_or(CAST(1 AS UBIGINT) << ((chunk_hash >> 12) & 63)) AS chunk_bits_2,
           list(CAST(chunk_hash >> 32 AS UINTEGER)) AS chunk_hashes
    FROM typed
    GROUP BY session_id, query_id, ranker
), checked AS (
    SELECT session_id, query_id, ranker, rows, bad, deep, shown, clicks, flagged,
           flagged_clicks,
           CASE WHEN bit_count(chunk_bits_0) = rows OR bit_count(chunk_bits_1) = rows
                     OR bit_count(chunk_bits_2) = rows THEN rows
                ELSE len(list_distinct(chunk_hashes)) END AS chunks
    FROM lists
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
FROM checked
