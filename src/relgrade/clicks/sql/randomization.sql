-- Click evidence of the randomized slice, compressed without loss for a session bootstrap:
-- each session becomes its pattern (the upper positions k of its randomized pairs within
-- $max_position, and the clicks at k and k + 1 of each), and the result holds one row per
-- distinct pattern with the number of sessions that show it.
WITH used AS (
    SELECT session_id, upper, click_upper, click_lower
    FROM relgrade_clicks_randomized_pairs
    WHERE lower <= $max_position
), sessions AS (
    SELECT session_id,
           list(upper ORDER BY upper) AS links,
           list(click_upper ORDER BY upper) AS clicks_upper,
           list(click_lower ORDER BY upper) AS clicks_lower
    FROM used
    GROUP BY session_id
)
SELECT links, clicks_upper, clicks_lower, count(*) AS sessions
FROM sessions
GROUP BY links, clicks_upper, clicks_lower
ORDER BY links, clicks_upper, clicks_lower
