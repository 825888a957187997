"""End to end: the locked human sample of a ppi experiment cannot be moved by renaming the
model grader, nor replaced by a lock forged with its hash recomputed.

Both start from the experiment of tests/test_e2e_ppi.py after its first turn (``ppi_graded``:
the model grader model-m and the human grader person-h have graded round 1), copied, and do
what a user did in a fresh-clone trial.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

EXP = "experiments/ppi"


def _errors(done):
    return [x for x in (done.stdout + done.stderr).splitlines() if x.startswith("Error: ")]


def test_renaming_the_model_grader_and_the_seed_does_not_redraw_the_locked_sample(
        ppi_graded, tmp_path):
    root = tiny.copy_repo(ppi_graded / "repo", tmp_path / "repo")
    folder = root / EXP
    # only the model has graded (the trial's state): the human grader's files are not there
    shutil.rmtree(folder / "data/grades/person-h")
    lock = (folder / "data/audit/lock.json").read_bytes()
    model_rows = sum(1 for line in (folder / "data/grades/model-m/round-1.jsonl")
                     .read_text().splitlines() if line.strip())
    params = folder / "params.yaml"
    text = params.read_text()
    assert "model-m" in text and "seed: 0\n" in text
    params.write_text(text.replace("model-m", "model-n").replace("seed: 0\n", "seed: 7\n", 1))
    done = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "drawn now" not in out
    errors = _errors(done)
    assert len(errors) == 1, out
    assert errors[0].startswith(
        f"Error: {EXP}/data/audit/lock.json: the human sample is locked: model-m (a grader "
        f"params no longer name) has {model_rows} grades of round 1 in "
        f"{EXP}/data/grades/model-m/round-1.jsonl, and params would move the sample"), errors
    assert (folder / "data/audit/lock.json").read_bytes() == lock


def test_a_lock_forged_with_its_hash_recomputed_is_refused(ppi_graded, tmp_path):
    from relgrade.protocol.audit import lock_sha256

    root = tiny.copy_repo(ppi_graded / "repo", tmp_path / "repo")
    folder = root / EXP
    lock_path = folder / "data/audit/lock.json"
    lock = json.loads(lock_path.read_text())
    audit_table = (folder / "data/audit/audit.jsonl").read_bytes()
    locked = [q["query_id"] for q in lock["queries"]]
    pool = sorted({json.loads(x)["query_id"] for x in
                   (folder / "data/grades/model-m/round-1.jsonl").read_text().splitlines()
                   if x.strip()})
    other = [q for q in pool if q not in locked]
    # the first locked query swapped for a query outside the sample, the hash recomputed
    forged = dict(lock)
    forged["queries"] = [dict(lock["queries"][0], query_id=other[0])] + lock["queries"][1:]
    forged["queries"].sort(key=lambda q: q["query_id"])
    forged["sha256"] = lock_sha256(forged)
    lock_path.write_text(json.dumps(forged, indent=2) + "\n")
    done = tiny.run(root, "dvc", "repro", "-s", f"{EXP}/dvc.yaml:audit", check=False)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    errors = _errors(done)
    assert len(errors) == 1, out
    assert errors[0].startswith(
        f"Error: {EXP}/data/audit/lock.json: the locked human sample is not the draw its "
        "recorded design gives (share 0.5; seed 0, stream ppi-sample)"), errors
    assert f"lock only: {other[0]}; draw only: {locked[0]}" in errors[0], errors
    assert f"Restore the lock from git (`git checkout -- {EXP}/data/audit/lock.json`)" \
        in errors[0], errors
    assert (folder / "data/audit/audit.jsonl").read_bytes() == audit_table
