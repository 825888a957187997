"""Stage `agreement`: the key grader against the auditor on the audit sample.

The stage's code is :mod:`relgrade.pipeline.stages.agreement`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.agreement import run

if __name__ == "__main__":
    run_stage(run)
