"""Stage `grades`: the judgment bank → the current grades of the pool, or the pending work.

The stage's code is :mod:`relgrade.pipeline.stages.grades`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.grades import run

if __name__ == "__main__":
    run_stage(run)
