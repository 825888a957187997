"""Stage `adjudicate`: the expert's grades replace the aggregate on the queued pairs; the key
grader's grades are written beside every grader's (``grading.mode: raters``).

The stage's code is :mod:`relgrade.pipeline.stages.adjudicate`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.adjudicate import run

if __name__ == "__main__":
    run_stage(run)
