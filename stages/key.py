"""Stage `key`: after a passed gate, freeze the key grader's grades as the hashed key.

The stage's code is :mod:`relgrade.pipeline.stages.key`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.key import run

if __name__ == "__main__":
    run_stage(run)
