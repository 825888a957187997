-- Per arm: the ranked (query, chunk) pairs the log never shows, and the ranked queries it
-- never answers. Neither can earn an IPS click, whatever its examination under the arm.
-- And the logged impressions that can carry the arm's reward: rows shown at a position with
-- a click weight ($positions) whose (query, chunk) the arm ranks at a rank the curve covers
-- (examination > 0). An arm with none would score 0 whatever users clicked.
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
), matched AS (
    SELECT r.arm, count(*) AS impressions
    FROM relgrade_clicks_log AS l
    JOIN relgrade_clicks_rankings AS r
      ON r.query_id = l.query_id AND r.chunk_id = l.chunk_id
    WHERE r.examination > 0 AND list_contains($positions, l.position)
    GROUP BY r.arm
)
SELECT arms.arm,
       coalesce(absent_chunks.chunks, 0) AS chunks,
       coalesce(absent_queries.queries, 0) AS queries,
       coalesce(matched.impressions, 0) AS impressions
FROM (SELECT DISTINCT arm FROM relgrade_clicks_rankings) AS arms
LEFT JOIN absent_chunks ON absent_chunks.arm = arms.arm
LEFT JOIN absent_queries ON absent_queries.arm = arms.arm
LEFT JOIN matched ON matched.arm = arms.arm
ORDER BY arms.arm
