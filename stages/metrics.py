"""Stage `metrics ARM`: one arm's measures on the frozen key, and the key's use in the ledger.

The stage's code is :mod:`relgrade.pipeline.stages.metrics`; dvc.yaml runs this file.
"""

import sys

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.metrics import run

if __name__ == "__main__":
    run_stage(run, *sys.argv[1:])
