"""Stage `training_set` (click experiments): the key's grades and the click pairs, together.

The stage's code is :mod:`relgrade.pipeline.stages.training_set`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.training_set import run

if __name__ == "__main__":
    run_stage(run)
