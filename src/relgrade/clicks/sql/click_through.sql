-- Impressions, clicks and IPS-weighted clicks per (query, chunk, position): the weighted
-- clicks divided by the impressions estimate the chunk's click probability had it been
-- examined, whatever the position (the IPS estimator; Joachims et al. 2017).
SELECT log.query_id, log.chunk_id, log.position,
       count(*) AS shown,
       sum(log.clicked) AS clicks,
       sum(log.clicked * weights.weight) AS weighted_clicks
FROM relgrade_clicks_log AS log
JOIN relgrade_clicks_weights AS weights ON weights.position = log.position
GROUP BY log.query_id, log.chunk_id, log.position
ORDER BY log.query_id, log.chunk_id, log.position
