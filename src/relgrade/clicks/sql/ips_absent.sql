-- Per arm: the ranked (query, chunk) pairs the log never shows, and the ranked queries it
-- never answers. Neither can earn an IPS click, whatever its examination under the arm.
WITH shown AS (
    SELECT DISTINCT query_id, chunk_id FROM relgrade_clicks_log
), queries AS (
    SELECT DISTINCT query_id FROM shown
), absent_chunks AS (
    SELECT r.arm, count(*) AS chunks
    FROM relgrade_clicks_rankings AS r
    ANTI JOIN shown AS s ON s.query_id = r.query_id AND s.chunk_id = r.chunk_id
    GROUP BY r.arm
), absent_queries AS (
    SELECT arm, count(DISTINCT query_id) AS queries
    FROM relgrade_clicks_rankings AS r
    WHERE query_id NOT IN (SELECT query_id FROM queries)
    GROUP BY arm
)
SELECT arms.arm,
       coalesce(absent_chunks.chunks, 0) AS chunks,
       coalesce(absent_queries.queries, 0) AS queries
FROM (SELECT DISTINCT arm FROM relgrade_clicks_rankings) AS arms
LEFT JOIN absent_chunks ON absent_chunks.arm = arms.arm
LEFT JOIN absent_queries ON absent_queries.arm = arms.arm
ORDER BY arms.arm
