-- IPS evidence per session: the summed weights of its clicks at positions with a weight
-- (the denominator of the self-normalised estimate) and, per arm, the summed weights times
-- the examination the arm gives each clicked chunk (the numerator). Sessions without such a
-- click are left out here and counted back as zeros by the caller.
WITH clicks AS (
    SELECT log.session_id, log.query_id, log.chunk_id, weights.weight
    FROM relgrade_clicks_log AS log
    JOIN relgrade_clicks_weights AS weights ON weights.position = log.position
    WHERE log.clicked = 1
), den AS (
    SELECT session_id, sum(weight) AS den FROM clicks GROUP BY session_id
), num AS (
    SELECT clicks.session_id, rankings.arm, sum(clicks.weight * rankings.examination) AS num
    FROM clicks
    JOIN relgrade_clicks_rankings AS rankings
      ON rankings.query_id = clicks.query_id AND rankings.chunk_id = clicks.chunk_id
    GROUP BY clicks.session_id, rankings.arm
)
SELECT den.session_id, den.den, num.arm, num.num
FROM den
LEFT JOIN num ON num.session_id = den.session_id
ORDER BY den.session_id, num.arm
