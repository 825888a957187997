-- The first randomized pair (by session id, then pair) that is not two adjacent positions.
SELECT session_id, rows, upper, lower
FROM relgrade_clicks_randomized_pairs
WHERE rows <> 2 OR lower <> upper + 1
ORDER BY session_id, pair
LIMIT 1
