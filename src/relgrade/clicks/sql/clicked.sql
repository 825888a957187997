-- The clicks that can give pairs: each clicked row at a position with a weight, with that
-- weight. Materialized as a temporary table so that DuckDB knows its exact size and builds
-- the pairs' hash join on it (the clicks) rather than on the unclicked rows, which are
-- usually several times more. A click at position 1 has no chunk above it and gives no
-- pair, so it is left out: the join's table is about a third smaller (fewer entries to
-- build and to probe past) and the pairs, and their order, are the same.
CREATE OR REPLACE TEMP TABLE relgrade_clicks_clicked AS
SELECT log.session_id, log.query_id, log.chunk_id, log.position, weights.weight
FROM relgrade_clicks_log AS log
JOIN relgrade_clicks_weights AS weights ON weights.position = log.position
WHERE log.clicked = 1 AND log.position > 1
