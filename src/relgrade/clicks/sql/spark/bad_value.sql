-- Spark SQL twin of ../bad_value.sql: the first row whose column breaks its rule.
SELECT CAST(session_id AS STRING) AS session_id,
       CAST(position AS STRING) AS position,
       CAST({column} AS STRING) AS found
FROM relgrade_clicks_raw
WHERE ({expression}) IS NULL
ORDER BY CAST(session_id AS STRING) ASC NULLS FIRST, position ASC NULLS FIRST
LIMIT 1
