"""Stage `holes`: arms that joined after the key froze, their holes graded, corrected estimates.

The stage's code is :mod:`relgrade.pipeline.stages.holes`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.holes import run

if __name__ == "__main__":
    run_stage(run)
