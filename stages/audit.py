"""Stage `audit`: pool provenance + queries → the audit queries, locked for the round.

The stage's code is :mod:`relgrade.pipeline.stages.audit`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.audit import run

if __name__ == "__main__":
    run_stage(run)
