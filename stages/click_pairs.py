"""Stage `pairs` (click experiments): IPS-weighted skip-above pairs of ``clicks.log``.

The stage's code is :mod:`relgrade.pipeline.stages.click_pairs`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.click_pairs import run

if __name__ == "__main__":
    run_stage(run)
