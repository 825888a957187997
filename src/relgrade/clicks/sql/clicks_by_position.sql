-- Clicks and impressions per position, for the summary of a pairs run.
SELECT position, count(*) AS shown, sum(clicked) AS clicks
FROM relgrade_clicks_log
GROUP BY position
ORDER BY position
