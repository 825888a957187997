"""Stage `gate`: agreement, a complete audit and the family rule; a fail stops the pipeline.

The stage's code is :mod:`relgrade.pipeline.stages.gate`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.gate import run

if __name__ == "__main__":
    run_stage(run)
