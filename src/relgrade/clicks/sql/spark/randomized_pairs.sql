-- Spark SQL twin of ../randomized_pairs.sql: the randomized slice as adjacent pairs.
CREATE OR REPLACE TEMP VIEW relgrade_clicks_randomized_pairs AS
WITH flagged AS (
    SELECT session_id, position, clicked,
           CAST(floor((row_number() OVER (PARTITION BY session_id ORDER BY position) - 1) / 2)
                AS BIGINT) AS pair
    FROM relgrade_clicks_log
    WHERE randomized
)
SELECT session_id,
       pair,
       count(*) AS rows,
       min(position) AS upper,
       max(position) AS lower,
       min_by(clicked, position) AS click_upper,
       max_by(clicked, position) AS click_lower
FROM flagged
GROUP BY session_id, pair
