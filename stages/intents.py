"""Stage `intents`: the intent table + its review record → the frozen intent table and manifest.

The stage's code is :mod:`relgrade.pipeline.stages.intents`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.intents import run

if __name__ == "__main__":
    run_stage(run)
