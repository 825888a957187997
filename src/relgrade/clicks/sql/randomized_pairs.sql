-- The randomized slice as pairs of adjacent positions. In a session, the rows flagged
-- randomized are taken in position order two at a time; each two must be the positions
-- (k, k + 1) whose documents a coin flip placed (RandPair / FairPairs).
CREATE OR REPLACE TEMP VIEW relgrade_clicks_randomized_pairs AS
WITH flagged AS (
    SELECT session_id, position, clicked,
           (row_number() OVER (PARTITION BY session_id ORDER BY position) - 1) // 2 AS pair
    FROM relgrade_clicks_log
    WHERE randomized
)
SELECT session_id,
       pair,
       count(*) AS rows,
       min(position) AS upper,
       max(position) AS lower,
       arg_min(clicked, position) AS click_upper,
       arg_max(clicked, position) AS click_lower
FROM flagged
GROUP BY session_id, pair
