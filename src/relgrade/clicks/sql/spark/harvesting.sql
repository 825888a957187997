-- Spark SQL twin of ../harvesting.sql (intervention harvesting, Agarwal et al. 2019).
-- A (query, chunk) is in the interventional set of the adjacent positions (k, k + 1) when
-- one ranker showed it at k and a different ranker at k + 1. Its click-through rate at a
-- position is clicks over impressions there, pooled over every ranker that showed it there:
-- that is the weighted estimator's 1 / w(q, d, k) weighting, with w the number of sessions
-- of the query in which a ranker put the chunk at k. The result is one row per query and
-- k: the sums of those rates at k and at k + 1 over the query's chunks in the set.
WITH randomized_sessions AS (
    SELECT DISTINCT session_id FROM relgrade_clicks_log WHERE randomized
), plain AS (
    SELECT l.query_id, l.chunk_id, l.ranker, l.position, l.clicked
    FROM relgrade_clicks_log AS l
    LEFT ANTI JOIN randomized_sessions AS r ON l.session_id = r.session_id
    WHERE l.position <= :max_position
), cells AS (
    SELECT query_id, chunk_id, ranker, position,
           count(*) AS shown, sum(clicked) AS clicks
    FROM plain
    GROUP BY query_id, chunk_id, ranker, position
), rates AS (
    SELECT query_id, chunk_id, position,
           CAST(sum(clicks) AS DOUBLE) / sum(shown) AS ctr
    FROM cells
    GROUP BY query_id, chunk_id, position
), links AS (
    SELECT DISTINCT a.query_id, a.chunk_id, a.position AS k
    FROM cells AS a
    JOIN cells AS b
      ON b.query_id = a.query_id AND b.chunk_id = a.chunk_id
     AND b.position = a.position + 1 AND b.ranker <> a.ranker
)
SELECT links.query_id,
       links.k,
       count(*) AS chunks,
       sum(upper.ctr) AS ctr_upper,
       sum(lower.ctr) AS ctr_lower
FROM links
JOIN rates AS upper
  ON upper.query_id = links.query_id AND upper.chunk_id = links.chunk_id
 AND upper.position = links.k
JOIN rates AS lower
  ON lower.query_id = links.query_id AND lower.chunk_id = links.chunk_id
 AND lower.position = links.k + 1
GROUP BY links.query_id, links.k
ORDER BY links.query_id, links.k
