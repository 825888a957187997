"""relgrade: blind pooled relevance grading and IR evaluation as a DVC pipeline.

Where each step of the protocol lives (one module per concept, packages by layer):

====================  ==========================================================
protocol step         module
====================  ==========================================================
corpus                relgrade.protocol.corpus, relgrade.protocol.chunking
queries               relgrade.protocol.queries; sampling: relgrade.query_sampling, stage sample
retrieve (arms)       relgrade.retrieve
pool, provenance      relgrade.protocol.pool (canonical ranking: relgrade.ranking; the
                      known-id check of every run row: relgrade.tables.pooling)
intents               relgrade.protocol.intents
audit sample          relgrade.protocol.audit
packets, orders       relgrade.protocol.packets
grades                relgrade.protocol.grades; channels: relgrade.graders
LLM triage            relgrade.protocol.triage (queue, inclusion, merge, miss rate)
agreement             relgrade.protocol.agreement, .reliability, .bands, .diagnostics
judge calibration     relgrade.protocol.calibration; ledger: relgrade.io.judge_ledger
gate                  relgrade.protocol.gate
key, void ledger      relgrade.protocol.key, relgrade.protocol.ledger
metrics               relgrade.evaluation.measures, relgrade.evaluation.metrics
comparisons           relgrade.evaluation.compare, .stats, .poolbias, .noise, .report, .weighting
decision report       relgrade.evaluation.decision (SVG charts: relgrade.evaluation.charts)
publish               relgrade.protocol.publish
several raters        relgrade.raters (gold, aggregate, report)
click training set    relgrade.clicks (log, propensity, pairs, ips, training, engine, spark)
====================  ==========================================================

Layers, top to bottom (each imports only from below; checked by import-linter):

- ``relgrade.cli/`` — the ``relgrade`` command, thin: options, one library call, rendering;
- ``relgrade.web/`` — the grading page (FastAPI + Jinja2);
- ``relgrade.pipeline/`` — the DVC pipeline as code: the stage registry that renders every
  ``dvc.yaml``, one module per stage, what a round owes, status, cost and the design record;
- ``relgrade.experiment/`` — the experiment on disk: typed params, paths, the stage runner;
- ``relgrade.graders/`` — how grades arrive: command graders, the grade store, exchange
  formats, Label Studio, self-consistency;
- ``relgrade.raters/`` — several raters per pair: gold questions, aggregation, their report;
- ``relgrade.protocol/``, ``relgrade.evaluation/``, ``relgrade.retrieve/``,
  ``relgrade.clicks/``, ``relgrade.query_sampling``, ``relgrade.io/`` — the library proper,
  independent of each other (``io/`` is the only package that reads and writes data files);
- ``relgrade.tables/`` — the table engine beneath them: DuckDB connections, the Spark
  session, and the SQL run on Arrow tables;
- ``relgrade.ranking``, ``relgrade.rng`` — the canonical ranking and id coding; seeded
  generators;
- ``relgrade.schema``, ``relgrade.canonical``, ``relgrade.errors`` — table columns, hashed
  byte forms, error classes;
- ``relgrade.terminal``, ``relgrade.text`` — outside text made inert (``\\u202e``) on every
  face: the streams every command and stage prints through, and the one function beneath.
"""

__version__ = "0.1.0"
