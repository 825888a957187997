-- Skip-above preference pairs (Joachims 2002; Joachims et al. 2005): in each session, the
-- chunk clicked at position k is preferred to every chunk shown above it (position < k) and
-- not clicked. The weight is that of the clicked position (1 / p(k), clipped), carried by
-- relgrade_clicks_clicked (clicked.sql); a click at a position without a weight is not in
-- that table and gives no pair.
SELECT clicked.query_id,
       clicked.chunk_id AS preferred_chunk_id,
       skipped.chunk_id AS other_chunk_id,
       clicked.weight,
       clicked.session_id
FROM relgrade_clicks_log AS skipped
JOIN relgrade_clicks_clicked AS clicked
  ON skipped.session_id = clicked.session_id
 AND skipped.position < clicked.position
WHERE skipped.clicked = 0
ORDER BY clicked.session_id, clicked.position, skipped.position
