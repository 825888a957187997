"""Stage `sample`: the query set drawn from the query log (params `queries.log`, `sample`).

The stage's code is :mod:`relgrade.pipeline.stages.sample`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.sample import run

if __name__ == "__main__":
    run_stage(run)
