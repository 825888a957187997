"""Stage `queries`: the query file → the validated queries table and its manifest (sha256).

The stage's code is :mod:`relgrade.pipeline.stages.queries`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.queries import run

if __name__ == "__main__":
    run_stage(run)
