-- Skip-above preference pairs (Joachims 2002; Joachims et al. 2005): in each session, the
-- chunk clicked at position k is preferred to every chunk shown above it (position < k) and
-- not clicked. The weight is that of the clicked position, from relgrade_clicks_weights
-- (1 / p(k), clipped); a click at a position without a weight gives no pair.
SELECT clicked.query_id,
       clicked.chunk_id AS preferred_chunk_id,
       skipped.chunk_id AS other_chunk_id,
       weights.weight,
       clicked.session_id
FROM relgrade_clicks_log AS clicked
JOIN relgrade_clicks_weights AS weights
  ON weights.position = clicked.position
JOIN relgrade_clicks_log AS skipped
  ON skipped.session_id = clicked.session_id
 AND skipped.position < clicked.position
 AND skipped.clicked = 0
WHERE clicked.clicked = 1
ORDER BY clicked.session_id, clicked.position, skipped.position
