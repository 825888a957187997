"""End to end: `grading.stop: anytime` turned on after people graded the whole human sample
(in id order, not the rule's seeded order), as a user would from docs/ppi.md: edit params,
`relgrade pipeline render`, `dvc repro`.

Nothing is owed: the ppi stage looks batch by batch at the grades already recorded, in the
seeded order, and stops at the first look that settles; `relgrade status` counts what people
owe from the recorded grades and shows params' margin; the decision files and `relgrade
metrics show` name the estimator of the differences (the rule's), and `relgrade metrics diff`
calls the committed PPI++ revision and the anytime workspace not comparable.

Arms as in tests/e2e/anytime.py: ``good`` ranks each topic's answer and pointer
first (on kw01 and qu01 the pointer first), ``poor`` the two near misses first; people grade
by the fixture's truth, the model grader is lenient (tests/graders/lenient_grader.py).
"""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.e2e import anytime, tiny
from tests.test_anytime import _scalar_log_capital
from tests.test_e2e_init_modes import _repo

pytestmark = [pytest.mark.slow]

EXP = "experiments/late"
NDCG = "nDCG(dcg='exp-log2')@10"


def _difference(qid):
    """People's nDCG@10 (gain 2^g - 1) of good minus poor on one query, by hand: the ideal
    list is answer (2), pointer (1)."""
    idcg = 3 / np.log2(2) + 1 / np.log2(3)
    good = (1 / np.log2(2) + 3 / np.log2(3)) / idcg if qid.endswith("01") else 1.0
    poor = (1 / np.log2(4) + 3 / np.log2(5)) / idcg
    return good - poor


def _set_params(folder, **grading):
    params = yaml.safe_load((folder / "params.yaml").read_text())
    params["grading"].update(grading)
    params["paths"].setdefault("stop", "data/audit/stop.json")
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture(scope="module")
def late(tmp_path_factory):
    root = _repo(tmp_path_factory, "late")
    anytime.init(root, EXP)
    folder = root / EXP
    tiny.run(root, "relgrade", "intents", "review", "--experiment", EXP, "--reviewer",
             "person-h")
    people = False
    for _ in range(4):  # without the rule: people grade the whole sample, in id order
        proc = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
        if proc.returncode == 0:
            break
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        pending = [x for x in proc.stderr.splitlines() if x.startswith("Pending: ")]
        assert pending, proc.stdout[-2000:] + proc.stderr[-2000:]
        for command in re.findall(r"`(relgrade grade run [^`]*)`", pending[0]):
            if "person-h" not in command:
                tiny.run(root, *command.split(), "--no-progress")
        if "person-h" in pending[0] and not people:
            pool = pd.read_parquet(folder / "data/pool/pool.parquet")
            lines = sorted(f"{q} 0 {c} {tiny.truth(c)}"
                           for q, c in zip(pool["query_id"], pool["chunk_id"]))
            (root / "people.qrels").write_text("\n".join(lines) + "\n")
            tiny.run(root, "relgrade", "grade", "import", "people.qrels", "--grader",
                     "person-h", "--experiment", EXP)
            people = True
    else:
        raise AssertionError("dvc repro did not complete without the rule")
    tiny.git(root, "add", "-A")
    tiny.git(root, "commit", "-qm", "whole sample graded, PPI++ decides")
    # the rule turned on afterwards, with the default margin first; `dvc repro` before the
    # pipeline is rendered again reruns the stages that list grading.stop, which refuse
    _set_params(folder, stop="anytime", stop_batch=4, stop_margin=0.05)
    unrendered = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    changed = subprocess.run(["git", "status", "--porcelain"], cwd=root, check=True,
                             capture_output=True, text=True).stdout.splitlines()
    tiny.run(root, "relgrade", "pipeline", "render", "--experiment", EXP)
    tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:audit")
    before = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    _set_params(folder, stop_margin=0.0)  # changed before the rule's first look
    status = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    first = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    again = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    return root, folder, before, status, first, again, (unrendered, changed)


def _expected_stop(order, population):
    """The first look (every 4 queries of ``order``) whose anytime p-value is <= 0.05: one
    comparison, so Holm is the p-value itself; margin 0 settles only by significance."""
    d = np.array([_difference(q) for q in order])
    log_k = _scalar_log_capital(list((d + 1) / 2), 0.5, 0.05, population)
    for t in range(4, len(order) + 1, 4):
        if np.exp(-max(log_k[:t])) <= 0.05:
            return t, d[:t].mean()
    raise AssertionError("the hand computation does not settle")


def test_turning_the_rule_on_without_rendering_is_one_error_naming_render(late):
    # no stage is "up to date": the stages that read the audited queries list grading.stop,
    # so dvc runs the first of them (audit), whose check of the pipeline's shape refuses
    unrendered, changed = late[-1]
    assert unrendered.returncode != 0
    assert "Traceback" not in unrendered.stderr, unrendered.stderr[-3000:]
    errors = [x for x in unrendered.stderr.splitlines() if x.startswith("Error: ")]
    assert len(errors) == 1, unrendered.stderr
    assert f"Run `relgrade pipeline render --experiment {EXP}`" in errors[0]
    assert "stages: audit, packets, grades, agreement, gate" in errors[0]
    # nothing committed was deleted or rewritten: only the params file the user edited moved
    assert changed == [f" M {EXP}/params.yaml"], changed


def test_nothing_is_owed_when_people_graded_the_whole_sample_first(late):
    _, folder, before, status, first, again, _ = late
    record = json.loads((folder / "data/audit/stop.json").read_text())
    order = record["order"]
    assert order != sorted(order)  # people graded in another order than the rule's
    assert ("people have graded the first 12 of 12 queries of the seeded order and owe none "
            "now") in status
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Pending:" not in first.stderr
    n, _ = _expected_stop(order, 12)
    assert record["settled_at"] == n and n < 12
    assert [x["t"] for x in record["looks"]] == list(range(4, n + 1, 4))
    assert f"ppi: settled at {n} of 12 queries" in first.stdout
    ppi = json.loads((folder / "metrics/ppi.json").read_text())
    assert ppi["stop"]["order"] == order[:n]
    assert ppi["stop"]["graded_beyond"] == sorted(order[n:])
    assert (f"ppi: {12 - n} more queries of the sample graded beyond the stop, kept in the "
            "bank, not used") in first.stdout
    assert sorted(ppi["design"]["human_sample"]) == sorted(order[:n])
    assert again.returncode == 0 and "Pending:" not in again.stderr


def test_status_shows_the_margin_params_give_now(late):
    root, _, before, status, _, _, _ = late
    # the record the audit stage wrote holds margin 0.05; params now say 0, and no look yet
    assert "margin 0.05, seed" in before
    # the edit itself is named first, as a params change since the last dvc repro
    assert "grading.stop_margin 0.05 -> 0.0" in status.splitlines()[0]
    rule = "\n".join(x for x in status.splitlines() if not x.startswith("params: "))
    assert "margin 0, seed" in rule and "margin 0.05" not in rule
    out = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    n = json.loads((root / EXP / "data/audit/stop.json").read_text())["settled_at"]
    assert f"stopping rule: settled at {n} of 12 queries" in out


def test_the_files_and_views_name_the_estimator_of_each_number(late):
    root, folder, _, _, _, _, _ = late
    record = json.loads((folder / "data/audit/stop.json").read_text())
    n, delta = _expected_stop(record["order"], 12)
    good = json.loads((folder / "metrics/decision/good.json").read_text())
    assert good["estimator"] == "ppi++" and good["delta_estimator"] == "anytime"
    assert good["delta"] == pytest.approx(delta, abs=1e-12)
    shown = tiny.run(root, "relgrade", "metrics", "show", "--experiment", EXP).stdout
    assert "delta and p_holm: anytime (the stopping rule's confidence sequence" in shown
    comps = json.loads((folder / "metrics/comparisons.json").read_text())
    assert comps["estimator"]["comparisons"] == "anytime"
    assert comps["estimator"]["note"].startswith("The arms' estimates are PPI++'s")
    diff = tiny.run(root, "relgrade", "metrics", "diff", "HEAD", "--experiment", EXP).stdout
    assert diff.splitlines()[0] == "not comparable: estimator ppi++ vs ppi++; delta anytime"
