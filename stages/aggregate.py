"""Stage `aggregate`: a rater panel's grades → gold accuracy, removed raters, one grade per
pair, and the adjudication queue with the expert's packets (``grading.mode: raters``).

The stage's code is :mod:`relgrade.pipeline.stages.aggregate`; dvc.yaml runs this file.
"""

from relgrade.pipeline.runner import run_stage
from relgrade.pipeline.stages.aggregate import run

if __name__ == "__main__":
    run_stage(run)
