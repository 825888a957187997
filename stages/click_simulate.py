"""Stage `simulate` (click experiments): a seeded, labelled-simulated click log with its truth.

The stage's code is :mod:`relgrade.pipeline.stages.click_simulate`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.click_simulate import run

if __name__ == "__main__":
    run_stage(run)
