"""Stage `pool`: every arm's run → the pool, its private provenance, manifest and statistics.

The stage's code is :mod:`relgrade.pipeline.stages.pool`; dvc.yaml runs this file.
"""

import gc

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.pool import run

# The imports' objects (modules, classes, the params models) live until the process ends:
# frozen, the collector no longer walks them in each full collection of the stage's work
# nor at the interpreter's shutdown (about 0.1 CPU-s of this process; benchmarks/README.md,
# "Pooling"). Nothing is skipped: objects are still freed, streams still flushed.
gc.freeze()

if __name__ == "__main__":
    run_stage(run)
