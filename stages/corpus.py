"""Stage `corpus`: the pinned source archive (or a chunks file) → the chunks table + manifest.

The stage's code is :mod:`relgrade.pipeline.stages.corpus`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.corpus import run

if __name__ == "__main__":
    run_stage(run)
