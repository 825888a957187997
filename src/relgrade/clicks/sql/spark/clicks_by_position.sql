-- Spark SQL twin of ../clicks_by_position.sql.
SELECT position, count(*) AS shown, sum(clicked) AS clicks
FROM relgrade_clicks_log
GROUP BY position
ORDER BY position
