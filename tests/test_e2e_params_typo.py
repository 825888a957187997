"""End to end: a params typo while a stage is out of date deletes no file kept in git.

DVC removes a stage's outputs before it runs the stage, unless they are marked ``persist``;
the stages refuse bad params only once they run. So every output kept in git (``cache:
false``) persists, and the stage writes it whole or not at all. On the tiny experiment, run to
its frozen key (the ``truth_frozen_built`` fixture), a user edits the gate's threshold:

* with a typo in the key's name (``weighted_kapa_min``): DVC refuses the params the gate
  stage lists before running it, and `relgrade status` names both problems of the file, the
  unknown key and the key it replaced;
* with a typo in a value of a later stage (``metrics.bootstrap: 10``, under its minimum
  1000): the gate stage runs and refuses with one `Error:` line.

Either way ``data/gate/gate.json`` is on disk byte for byte as it was.
"""

from __future__ import annotations

import pytest
import yaml

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

GATE = "data/gate/gate.json"


def _edit(root, section, **keys):
    """Set ``keys`` (None: remove the key) in one section of the experiment's params."""
    path = root / "params.yaml"
    params = yaml.safe_load(path.read_text())
    for key, value in keys.items():
        if value is None:
            del params[section][key]
        else:
            params[section][key] = value
    path.write_text(yaml.safe_dump(params, sort_keys=False))


def test_a_typo_in_a_gate_key_keeps_the_pass_record_and_status_names_both_problems(
        tmp_path, truth_frozen_built):
    root = tiny.copy_repo(truth_frozen_built, tmp_path)
    before = (root / GATE).read_bytes()
    _edit(root, "gates", weighted_kappa_min=None, weighted_kapa_min=0.7)
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0
    assert "Parameters 'gates.weighted_kappa_min' are missing" in proc.stderr, proc.stderr
    assert (root / GATE).read_bytes() == before
    status = tiny.run(root, "relgrade", "status", check=False)
    assert status.returncode == 1
    lines = [x for x in status.stderr.splitlines() if x.strip()]
    assert lines == [
        "Error: params.yaml: gates.weighted_kapa_min: unknown key. Known keys here: "
        "weighted_kappa_min, binary_kappa_min, disagreement_max, two_step_max, "
        "audit_coverage_min, require_distinct_families. 1 more problem in this file: "
        "gates.weighted_kappa_min: is required"], status.stderr


def test_a_bad_value_while_the_gate_is_out_of_date_keeps_the_pass_record(
        tmp_path, truth_frozen_built):
    root = tiny.copy_repo(truth_frozen_built, tmp_path)
    before = (root / GATE).read_bytes()
    _edit(root, "gates", weighted_kappa_min=0.7)  # the gate is out of date
    _edit(root, "metrics", bootstrap=10)  # read by the compare stage, after the gate
    proc = tiny.run(root, "dvc", "repro", check=False)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("Error: ")]
    assert errors == ["Error: params.yaml: metrics.bootstrap: must be an integer >= 1000 "
                      "(found 10)"], proc.stderr
    assert "Running stage 'gate'" in proc.stdout
    assert (root / GATE).read_bytes() == before
