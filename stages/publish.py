"""Stage `publish`: the public bundle (key, record, metrics), written only if it holds no private text.

The stage's code is :mod:`relgrade.pipeline.stages.publish`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.publish import run

if __name__ == "__main__":
    run_stage(run)
