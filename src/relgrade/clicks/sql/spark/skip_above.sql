-- Spark SQL twin of ../clicked.sql + ../skip_above.sql: skip-above pairs weighted by the
-- clicked position's IPS weight, ordered by session, clicked position, skipped position.
WITH clicked AS (
    SELECT log.session_id, log.query_id, log.chunk_id, log.position, weights.weight
    FROM relgrade_clicks_log AS log
    JOIN relgrade_clicks_weights AS weights ON weights.position = log.position
    WHERE log.clicked = 1
)
SELECT clicked.query_id,
       clicked.chunk_id AS preferred_chunk_id,
       skipped.chunk_id AS other_chunk_id,
       clicked.weight,
       clicked.session_id
FROM relgrade_clicks_log AS skipped
JOIN clicked
  ON skipped.session_id = clicked.session_id
 AND skipped.position < clicked.position
WHERE skipped.clicked = 0
ORDER BY clicked.session_id, clicked.position, skipped.position
