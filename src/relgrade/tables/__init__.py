"""The table engine: DuckDB over Arrow tables and Parquet files.

:mod:`relgrade.tables.engine` opens connections (threads, memory limit, spill folder);
:mod:`relgrade.tables.pooling` holds the SQL of the pool stage's checks. A query here takes
Arrow tables or file paths and returns Arrow or plain Python values; the rules it checks are
the protocol's (:mod:`relgrade.ranking`, :mod:`relgrade.protocol.pool`), and a bad row's
message is worded there.
"""
