"""Stage `ppi`: prediction-powered estimates, the judge audit and the budget curve.

The stage's code is :mod:`relgrade.pipeline.stages.ppi`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.ppi import run

if __name__ == "__main__":
    run_stage(run)
