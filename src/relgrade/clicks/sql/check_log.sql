-- The log's check and the click patterns every estimator needs, in one grouped pass.
-- Rows are grouped by (session, query, ranker): a clean session is one such list, so a
-- session that answers several queries or comes from several rankers shows up as more lists
-- than sessions, without keeping the ids' minimum and maximum per session. Per list: the
-- positions shown as a 64-bit mask, the masks of the clicked and the randomized positions,
-- and what tells whether a chunk is shown twice. A row sets its position's bit only when it
-- breaks no row rule (no NULL in the typed view) and its position is at most 64, so a list
-- whose mask has fewer bits than the list has rows holds a bad value, a position above 64
-- or a position shown twice: one comparison flags all three, with no counter per rule.
-- The clicked randomized positions are the bits set in both the clicked and the randomized
-- mask (each position is one row in a list that is not flagged).
-- Whether a chunk is shown twice is exact and mostly cheap: three 64-bit masks each set one
-- bit per row, chosen by six bits of the chunk id's 64-bit hash (bits 0-5, 6-11, 12-17); when
-- one mask has as many bits as the list has rows, the hashes differ and so do the chunks.
-- Only the other lists (about 14% of ten-row lists) count their distinct hashes, kept as the
-- hash's upper 32 bits to halve the list's memory (a collision there only sends the log to
-- the exact pass, which compares the ids).
-- It reads relgrade_clicks_part: the whole log, or, for a log stored sorted by session, one
-- range of session ids at a time (the caller adds up the ranges' rows; no session spans two
-- ranges, so every count is a sum and the histograms merge by key).
-- The result is one row: the totals of the check and a histogram of the lists' masks (a
-- few hundred distinct patterns for millions of sessions), from which the randomization
-- estimate and the clicks per position are read without another pass. Anything flagged
-- here is looked at again by check_log_exact.sql, which words the error (or, for a log
-- whose only oddity is positions above 64, finds none); a repeated chunk hash is confirmed
-- on the ids there.
WITH typed AS (
    SELECT session_id, query_id, ranker,
           CASE WHEN position <= 64 AND chunk_id IS NOT NULL AND clicked IS NOT NULL
                     AND randomized IS NOT NULL
                THEN CAST(1 AS UBIGINT) << CAST(position - 1 AS UBIGINT)
                ELSE CAST(0 AS UBIGINT) END AS bit,
           CAST(clicked AS UBIGINT) AS clicked,
           CAST(randomized AS UBIGINT) AS randomized,
           hash(chunk_id) AS chunk_hash
    FROM relgrade_clicks_part
), lists AS (
    SELECT session_id, query_id, ranker,
           count(*) AS rows,
           bit_or(bit) AS shown,
           bit_or(bit * clicked) AS clicks,
           bit_or(bit * randomized) AS flagged,
           bit_or(CAST(1 AS UBIGINT) << (chunk_hash & 63)) AS chunk_bits_0,
           bit_or(CAST(1 AS UBIGINT) << ((chunk_hash >> 6) & 63)) AS chunk_bits_1,
           bit_or(CAST(1 AS UBIGINT) << ((chunk_hash >> 12) & 63)) AS chunk_bits_2,
           list(CAST(chunk_hash >> 32 AS UINTEGER)) AS chunk_hashes
    FROM typed
    GROUP BY session_id, query_id, ranker
), checked AS (
    SELECT session_id, query_id, ranker, rows, shown, clicks, flagged,
           CASE WHEN bit_count(chunk_bits_0) = rows OR bit_count(chunk_bits_1) = rows
                     OR bit_count(chunk_bits_2) = rows THEN rows
                ELSE len(list_distinct(chunk_hashes)) END AS chunks
    FROM lists
)
SELECT coalesce(sum(rows), 0) AS rows,
       count(*) AS lists,
       count(DISTINCT session_id) AS sessions,
       count(*) FILTER (WHERE bit_count(shown) < rows OR session_id IS NULL
                              OR query_id IS NULL OR ranker IS NULL) AS flagged,
       count(*) FILTER (WHERE chunks < rows) AS repeated_chunk,
       histogram({'shown': shown, 'clicks': clicks, 'flagged': flagged,
                  'flagged_clicks': clicks & flagged}) AS patterns
FROM checked
