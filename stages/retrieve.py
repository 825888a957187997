"""Stage `retrieve ARM`: one arm's run over the chunks and queries → data/runs/ARM.trec.

The stage's code is :mod:`relgrade.pipeline.stages.retrieve`; dvc.yaml runs this file.
"""

import sys

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.retrieve import run

if __name__ == "__main__":
    run_stage(run, *sys.argv[1:])
