"""experiments/ppi-sim has no probe report: the ppi stage's function, run on its inputs,
writes metrics/ppi.json byte for byte as committed (the paraphrase widening changes nothing
without a report).

The stage's inputs (per-query tables, runs, pool, key, grades) are DVC outputs: present in
a working copy where the pipeline ran (or after `dvc checkout`), absent from a fresh clone,
where this test is skipped and says so.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXP = REPO / "experiments" / "ppi-sim"


def _outputs_present() -> bool:
    return (EXP / "data/pool/pool.parquet").is_file() and all(
        any((EXP / folder).glob(pattern))
        for folder, pattern in (("data/metrics", "*.parquet"), ("data/runs", "*.trec")))


@pytest.mark.skipif(not _outputs_present(), reason="experiments/ppi-sim's DVC outputs are not "
                    "checked out (dvc checkout experiments/ppi-sim/dvc.yaml)")
def test_the_ppi_stage_on_ppi_sim_writes_the_committed_ppi_json_to_the_byte(tmp_path):
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.params import PARAMS_FILE
    from relgrade.pipeline.stages.ppi import run

    assert not (EXP / "judges").exists()  # no probe report: nothing to widen by
    repo = tmp_path / "repo"
    (repo / "stages").mkdir(parents=True)
    shutil.copy(REPO / "dvc.yaml", repo / "dvc.yaml")
    shutil.copytree(REPO / "judges", repo / "judges") if (REPO / "judges").exists() else None
    copy = repo / "experiments" / "ppi-sim"
    shutil.copytree(EXP, copy)
    committed = (EXP / "metrics" / "ppi.json").read_bytes()
    (copy / "metrics" / "ppi.json").unlink()
    run(Experiment.load(copy / PARAMS_FILE))
    assert (copy / "metrics" / "ppi.json").read_bytes() == committed
