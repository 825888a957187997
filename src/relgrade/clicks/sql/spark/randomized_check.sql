-- Spark SQL twin of ../randomized_check.sql.
SELECT session_id, rows, upper, lower
FROM relgrade_clicks_randomized_pairs
WHERE rows <> 2 OR lower <> upper + 1
ORDER BY session_id, pair
LIMIT 1
