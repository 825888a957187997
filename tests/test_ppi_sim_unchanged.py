"""experiments/ppi-sim has no probe report: the ppi stage's function, run on its inputs,
writes metrics/ppi.json byte for byte as committed (the paraphrase widening changes nothing
without a report).

The stage's inputs (per-query tables, runs, pool, key, grades) are DVC outputs: the test runs
on a clone's copy of the experiment whose pipeline `dvc repro` ran to the ppi stage (the
shared `ppi_sim_built`), then runs the stage's function again without its output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import tiny

REPO = Path(__file__).resolve().parents[1]
EXP = REPO / "experiments" / "ppi-sim"


@pytest.mark.slow
def test_the_ppi_stage_on_ppi_sim_writes_the_committed_ppi_json_to_the_byte(tmp_path,
                                                                           ppi_sim_built):
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.params import PARAMS_FILE
    from relgrade.pipeline.stages.ppi import run

    assert not (EXP / "judges").exists()  # no probe report: nothing to widen by
    repo = tiny.copy_repo(ppi_sim_built / "repo", tmp_path / "repo")
    copy = repo / "experiments" / "ppi-sim"
    assert not (copy / "judges").exists()
    committed = (EXP / "metrics" / "ppi.json").read_bytes()
    (copy / "metrics" / "ppi.json").unlink()
    run(Experiment.load(copy / PARAMS_FILE))
    assert (copy / "metrics" / "ppi.json").read_bytes() == committed
