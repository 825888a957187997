"""Click logs: position propensities and an IPS-weighted preference training set.

A click log is evidence about the ranking users were shown, not a grade: the chunk at
position 1 is clicked more than the same chunk at position 3 because it is examined more.
This package turns an impression log into

* a position propensity curve p(k) / p(1), estimated either from a randomized slice of
  traffic (adjacent swaps, :func:`relgrade.clicks.propensity.randomization`) or from the
  variation between rankers that already ran side by side
  (:func:`relgrade.clicks.propensity.harvesting`), each with a bootstrap interval; and
* skip-above preference pairs weighted by the inverse propensity of the clicked position
  (:func:`relgrade.clicks.pairs.skip_above`);
* IPS and self-normalised IPS estimates of any ranking's click reward from the log
  (:func:`relgrade.clicks.ips.arm_estimates`); and
* a learning-to-rank training set of the key's grades and the click pairs
  (:func:`relgrade.clicks.training.training_set`).

The SQL runs on DuckDB or, with the same results, on Apache Spark
(:mod:`relgrade.clicks.engine`, :mod:`relgrade.clicks.spark`); :mod:`relgrade.clicks.simulate`
draws seeded logs with known propensities and relevances to check all of it against.

Every pass over the log runs in DuckDB, from the SQL files in ``relgrade/clicks/sql/``, so
the log never has to fit in memory: Python receives only small aggregates (one row per
propensity link, per randomized-session pattern or per query), and the pairs are written by
DuckDB straight to Parquet. The caller owns the DuckDB connection and opens the log on it
(``con.read_parquet(...)``, ``con.read_csv(...)`` or a registered DataFrame); this package
reads no file itself.

The impression log
------------------
One row per chunk shown in a session (a session is one result list shown once):

==============  ===============================================================
column          meaning
==============  ===============================================================
``session_id``  the result list shown (string; integers are read as strings)
``query_id``    the query it answered (one per session)
``chunk_id``    the chunk shown (each at most once per session)
``position``    1-based position on the page (each at most once per session)
``clicked``     0 or 1 (``true`` / ``false`` accepted)
``ranker``      the ranker that produced the list (one per session)
``randomized``  true for a row whose chunk a coin flip placed within an adjacent pair
==============  ===============================================================

In a session of the randomized slice the flagged rows, in position order, taken two at a
time, are the adjacent pairs (k, k + 1) whose two chunks were swapped with probability 1/2:
one pair per session for RandPair, every pair of a FairPairs partition for FairPairs.
"""

from __future__ import annotations

from relgrade.clicks.log import LOG_COLUMNS, LOG_VIEW, RAW_VIEW, ClickLog, connect, sql

__all__ = ["LOG_COLUMNS", "LOG_VIEW", "RAW_VIEW", "ClickLog", "connect", "sql"]
