"""Stage `report`: the comparison report → the decision report and the per-arm dvc metrics.

The stage's code is :mod:`relgrade.pipeline.stages.report`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.report import run

if __name__ == "__main__":
    run_stage(run)
