-- The first row (by session id, then position as stored) whose column breaks its rule,
-- with the value as stored, for the error message.
SELECT CAST(session_id AS VARCHAR) AS session_id,
       CAST(position AS VARCHAR) AS position,
       CAST({column} AS VARCHAR) AS found
FROM relgrade_clicks_raw
WHERE ({expression}) IS NULL
ORDER BY CAST(session_id AS VARCHAR) NULLS FIRST, position NULLS FIRST
LIMIT 1
