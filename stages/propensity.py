"""Stage `propensity` (click experiments): the position propensity curve of ``clicks.log``.

The stage's code is :mod:`relgrade.pipeline.stages.propensity`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.propensity import run

if __name__ == "__main__":
    run_stage(run)
