-- The impression log with relgrade's column types, over the caller's relation
-- (registered as relgrade_clicks_raw). Each brace-named slot is a typed expression chosen by
-- relgrade.clicks for the column's stored type; a value that breaks the log's rules
-- becomes NULL here, and check_log.sql counts those NULLs. {view} is the view's name and
-- {source} what it reads: the whole raw log (relgrade_clicks_log), or the raw rows of one
-- range of session ids (relgrade_clicks_part, which check_log.sql reads), filtered on the
-- stored column so that the Parquet reader skips the row groups outside the range.
CREATE OR REPLACE TEMP VIEW {view} AS
SELECT
    {session_id} AS session_id,
    {query_id} AS query_id,
    {chunk_id} AS chunk_id,
    {position} AS position,
    {clicked} AS clicked,
    {ranker} AS ranker,
    {randomized} AS randomized
FROM {source}
