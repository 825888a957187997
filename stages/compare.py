"""Stage `compare`: per-query values, key, runs, grades, audit, provenance → decisions.

The stage's code is :mod:`relgrade.pipeline.stages.compare`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.compare import run

if __name__ == "__main__":
    run_stage(run)
