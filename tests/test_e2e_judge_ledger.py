"""End to end: a prediction-powered experiment made by `relgrade init --mode ppi` with
`judges.require_calibration`, run by the user's loop alone: `dvc repro`, the commands its
Pending lines name (grading, then the judge's calibration), `dvc repro` again; the ledger then
holds the model judge's identity and `relgrade judge status` says it is calibrated.

The experiment starts as tests/test_e2e_ppi.py's (the session fixture ``ppi_graded``: made by
init, intents reviewed, the loop's first turn taken, the grading it owed done); the judges
params are set and the pipeline rendered before the gate or the ppi stage has ever run, the
only stages those params reach.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.e2e import tiny
from tests.test_e2e_ppi import EXP

pytestmark = [pytest.mark.slow]


def test_a_required_calibration_stops_the_gate_until_judge_record_then_the_loop_completes(
        tmp_path, ppi_graded):
    # made by `relgrade init --mode ppi --human-fraction 0.5`, intents reviewed, `dvc repro`
    # stopped at the grading owed and its `relgrade grade run` commands run (ppi_graded)
    root = tiny.copy_repo(ppi_graded / "repo", tmp_path / "judged")
    exp = EXP
    stages = yaml.safe_load((root / exp / "dvc.lock").read_text())["stages"]
    assert "gate" not in stages and "ppi" not in stages  # neither has run yet
    seen = json.loads((ppi_graded / "pending.json").read_text())
    assert any("need model-m" in x for x in seen)
    params_path = root / exp / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    # the human sample's pairs stand as the calibration (above the floor set here)
    params["judges"] = {"max_age_days": 30, "require_calibration": True,
                        "recheck": {"min_pairs": 10}}
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.run(root, "relgrade", "pipeline", "render", "--experiment", exp)
    stages = yaml.safe_load((root / exp / "dvc.yaml").read_text())["stages"]
    for stage in ("gate", "ppi"):
        assert {"judges.max_age_days", "judges.require_calibration", "judges.recheck"} <= \
            set(stages[stage]["params"])
    for _ in range(4):
        proc = tiny.run(root, "dvc", "repro", f"{exp}/dvc.yaml", check=False)
        if proc.returncode == 0:
            break
        pending = [x for x in proc.stderr.splitlines() if x.startswith("Pending: ")]
        assert pending and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        seen += pending
        for command in re.findall(r"`(relgrade grade run [^`]*)`", pending[0]):
            tiny.run(root, *command.split(), "--no-progress")
        for command in re.findall(r"(relgrade judge record --grader \S+ --experiment [^\s,]+)",
                                  pending[0]):
            tiny.run(root, *command.split())
    else:
        raise AssertionError(f"dvc repro did not complete: {seen}")
    owed = [x for x in seen if "judge calibration: model-m identity" in x]
    assert owed and "no calibration recorded; owed: a re-check against people, relgrade " \
        f"judge record --grader model-m --experiment {exp} (" in owed[0]
    assert re.search(r"\((\d+) pairs graded by person-h have a grade of this identity\)",
                     owed[0])
    (entry,) = [json.loads(x) for x in
                (root / "judges/ledger.jsonl").read_text().splitlines()]
    assert (entry["experiment"], entry["grader"], entry["against"]) == \
        (exp, "model-m", "person-h")
    sample = json.loads((root / exp / "metrics/ppi.json").read_text())["design"]["human_sample"]
    assert entry["queries"] == len(sample) and entry["pairs"] > 0
    status = tiny.run(root, "relgrade", "judge", "status", "--experiment", exp).stdout
    assert f"judge: model-m identity {entry['judge'][:12]}: calibrated" in status
