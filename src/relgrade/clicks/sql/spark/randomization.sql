-- Spark SQL twin of ../randomization.sql: one row per distinct session pattern of the
-- randomized slice (links, clicks at k and k + 1 of each, in link order) with its count.
WITH used AS (
    SELECT session_id, upper, click_upper, click_lower
    FROM relgrade_clicks_randomized_pairs
    WHERE lower <= :max_position
), sessions AS (
    SELECT session_id,
           array_sort(collect_list(struct(upper, click_upper, click_lower))) AS pairs
    FROM used
    GROUP BY session_id
)
SELECT transform(pairs, p -> p.upper) AS links,
       transform(pairs, p -> p.click_upper) AS clicks_upper,
       transform(pairs, p -> p.click_lower) AS clicks_lower,
       count(*) AS sessions
FROM sessions
GROUP BY 1, 2, 3
