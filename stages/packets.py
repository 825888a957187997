"""Stage `packets`: pool + chunks + frozen, reviewed intents → one packet per query and role.

The stage's code is :mod:`relgrade.pipeline.stages.packets`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.packets import run

if __name__ == "__main__":
    run_stage(run)
