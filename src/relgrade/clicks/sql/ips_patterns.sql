-- The IPS evidence of every session as a sparse vector of counts, compressed without loss
-- into distinct patterns with the number of sessions showing each (for a session
-- bootstrap). Columns of the dense vector, with K = $max_position and A arms:
--   k - 1                                 clicks at position k (k <= K)
--   K + a*K*K + (k - 1)*K + (j - 1)       clicks at position k on a chunk arm a ranks at j
--   K + A*K*K + 2*(l - 1) [+ 1]           clicks at the upper [lower] position of the
--                                         session's randomized pair (l, l + 1) ($joint only)
-- Sessions without any count are not listed: the caller counts them as the zero pattern.
WITH clicks AS (
    SELECT session_id, query_id, chunk_id, position
    FROM relgrade_clicks_log
    WHERE clicked = 1 AND position <= $max_position
), cells AS (
    SELECT session_id, position - 1 AS col, count(*) AS n
    FROM clicks
    GROUP BY session_id, position
    UNION ALL
    SELECT c.session_id,
           $max_position + r.arm_code * $max_position * $max_position
             + (c.position - 1) * $max_position + (r.rank - 1) AS col,
           count(*) AS n
    FROM clicks AS c
    JOIN relgrade_clicks_rankings AS r
      ON r.query_id = c.query_id AND r.chunk_id = c.chunk_id
    WHERE r.rank <= $max_position
    GROUP BY c.session_id, r.arm_code, c.position, r.rank
    UNION ALL
    SELECT session_id, $evidence + 2 * (upper - 1) + side AS col,
           sum(CASE WHEN side = 0 THEN click_upper ELSE click_lower END) AS n
    FROM relgrade_clicks_randomized_pairs, (SELECT unnest([0, 1]) AS side)
    WHERE $joint AND lower <= $max_position
    GROUP BY session_id, upper, side
), sessions AS (
    SELECT session_id, list(col ORDER BY col) AS cols, list(n ORDER BY col) AS ns
    FROM cells
    WHERE n > 0
    GROUP BY session_id
)
SELECT cols, ns, count(*) AS sessions
FROM sessions
GROUP BY cols, ns
ORDER BY cols, ns
