"""Stage `pool`: every arm's run → the pool, its private provenance, manifest and statistics.

The stage's code is :mod:`relgrade.pipeline.stages.pool`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.pool import run

if __name__ == "__main__":
    run_stage(run)
