"""Stage `ips` (click experiments): IPS and self-normalised IPS estimates of each ranking.

The stage's code is :mod:`relgrade.pipeline.stages.ips`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.ips import run

if __name__ == "__main__":
    run_stage(run)
