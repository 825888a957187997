"""Stage `gold`: the gold file of a rater panel, written from the pool by params `gold.command`.

The stage's code is :mod:`relgrade.pipeline.stages.gold`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.gold import run

if __name__ == "__main__":
    run_stage(run)
