-- Spark SQL twin of ../log_view.sql: the impression log with relgrade's column types over
-- the caller's DataFrame (relgrade_clicks_raw); a value breaking its rule becomes NULL.
CREATE OR REPLACE TEMP VIEW relgrade_clicks_log AS
SELECT
    {session_id} AS session_id,
    {query_id} AS query_id,
    {chunk_id} AS chunk_id,
    {position} AS position,
    {clicked} AS clicked,
    {ranker} AS ranker,
    {randomized} AS randomized
FROM relgrade_clicks_raw
