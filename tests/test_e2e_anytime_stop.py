"""End to end: a ppi experiment with `grading.stop: anytime`, run by the user's loop
(`dvc repro`, then every command its Pending line names, run as printed and in order: the
`dvc repro PATH/dvc.yaml:packets` that writes the next batch's packets, then the human
grader's `relgrade grade run`, which grades exactly that batch; `dvc repro` again;
`relgrade status` names the same owed queries and commands as each Pending line): the
ppi stage settles before the sample is used up, says "settled at N of M queries", and
`relgrade status` owes nothing more; the anytime p-value in ppi.json equals an independent
scalar computation on the per-query differences people's grades give.

Arms: ``good`` ranks each topic's answer and pointer first (on kw01 and qu01 the pointer
first), ``poor`` ranks the two near misses first; the human grader grades by the fixture's
truth (tests/graders/tiny_grader.py), the model grader is lenient
(tests/graders/lenient_grader.py).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.e2e import anytime, tiny
from tests.test_anytime import _scalar_log_capital
from tests.test_e2e_init_modes import _repo

pytestmark = [pytest.mark.slow]

EXP = "experiments/stop"
NDCG = "nDCG(dcg='exp-log2')@10"


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    root = _repo(tmp_path_factory, "stop")
    anytime.init(root, EXP, auditor_command=anytime.PEOPLE)
    folder = root / EXP
    params = yaml.safe_load((folder / "params.yaml").read_text())
    params["grading"].update(stop="anytime", stop_batch=4, stop_margin=0.0)
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    tiny.run(root, "relgrade", "pipeline", "render", "--experiment", EXP)
    tiny.run(root, "relgrade", "intents", "review", "--experiment", EXP, "--reviewer",
             "person-h")
    seen, outs, named, graded_ids = [], [], [], []
    for i in range(8):
        proc = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
        outs.append(proc.stdout + proc.stderr)
        if proc.returncode == 0:
            break
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        pending = [x for x in proc.stderr.splitlines() if x.startswith("Pending: ")]
        assert pending, proc.stdout[-2000:] + proc.stderr[-2000:]
        seen += pending
        if "person-h" in pending[0]:
            queries = re.findall(r"\b(?:kw|qu)\d\d\b", pending[0].split("person-h", 1)[1])
            named.append(queries)
        if "person-h owes" in pending[0]:  # the ppi stage's look: the next batch
            # relgrade status names the same owed queries and the same commands
            status = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
            line = next(x for x in status.splitlines() if "stopping rule:" in x)
            assert f"({', '.join(queries)})" in line, (line, pending[0])
            assert re.findall(r"`([^`]*)`", line) == [
                f"dvc repro {EXP}/dvc.yaml:packets",
                f"relgrade grade run --grader person-h --experiment {EXP}"], line
        # every command the Pending line names, run as printed, in order
        commands = re.findall(r"`((?:dvc repro|relgrade grade run) [^`]*)`", pending[0])
        assert commands, pending[0]
        if "person-h owes" in pending[0]:
            assert commands == re.findall(r"`([^`]*)`", line) + [f"dvc repro {EXP}/dvc.yaml"]
        for command in commands:
            if command == f"dvc repro {EXP}/dvc.yaml":
                continue  # the look again: the loop's next turn
            if command.startswith("dvc"):
                tiny.run(root, *command.split())
                continue
            done = tiny.run(root, *command.split(), "--no-progress").stdout
            if "--grader person-h" in command:
                # the batch is graded by the printed command itself, nothing else
                assert re.search(rf"person-h: graded {4 * len(queries)} pairs", done), done
                graded_ids.append(set(queries))
    else:
        raise AssertionError(f"dvc repro did not complete: {seen}")
    assert [len(g) for g in graded_ids] == [len(b) for b in named]
    return root, folder, seen, outs, named


def _ran(proc) -> list[str]:
    """The stages a `dvc repro` ran (its "Running stage 'NAME':" lines)."""
    return re.findall(r"Running stage '([^']+)'", proc.stdout + proc.stderr)


def test_once_settled_and_committed_dvc_repro_runs_nothing_and_status_is_clean(
        stopped, tmp_path_factory):
    # first in the module: a copy of the repository as the run that settled left it
    root = tiny.copy_repo(stopped[0], tmp_path_factory.mktemp("at-rest"))
    tiny.run(root, "git", "add", "-A")
    tiny.run(root, "git", "commit", "-q", "-m", "the anytime experiment, settled")
    record = (root / EXP / "data/audit/stop.json").read_bytes()
    # beside the record, the queries the rule read: the first settled_at of its order
    settled = json.loads(record)
    assert (root / EXP / "data/audit/stop.json.reads").read_text().split() == \
        settled["order"][:settled["settled_at"]]
    # the run that settled the decision left nothing for the next one to do
    again = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml")
    assert _ran(again) == [], again.stdout[-3000:]
    assert tiny.run(root, "dvc", "status", f"{EXP}/dvc.yaml").stdout.strip() == (
        "Data and pipelines are up to date.")
    assert tiny.run(root, "git", "status", "--porcelain").stdout == ""
    assert (root / EXP / "data/audit/stop.json").read_bytes() == record


def test_people_are_asked_for_batches_in_the_seeded_order(stopped):
    _, folder, _, _, named = stopped
    record = json.loads((folder / "data/audit/stop.json").read_text())
    order = record["order"]
    assert sorted(order) == sorted(q for q, *_ in tiny.TOPICS)
    # each Pending line named the next batch of 4 of the recorded order, nothing else
    assert [sorted(b) for b in named] == [sorted(order[4 * i:4 * i + 4])
                                          for i in range(len(named))]


def test_the_stage_settles_before_the_sample_is_used_up_and_says_so(stopped):
    _, folder, _, outs, named = stopped
    record = json.loads((folder / "data/audit/stop.json").read_text())
    n = record["settled_at"]
    assert n is not None and n < 12
    assert [x["t"] for x in record["looks"]] == list(range(4, n + 1, 4))
    assert f"ppi: settled at {n} of 12 queries" in outs[-1]
    # people graded exactly the first n queries of the order
    graded = {json.loads(x)["query_id"] for x in
              (folder / "data/grades/person-h/round-1.jsonl").read_text().splitlines()}
    assert graded == set(record["order"][:n])
    assert sum(len(b) for b in named) == n


def test_status_owes_nothing_once_settled(stopped):
    root, _, _, _, _ = stopped
    out = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    n = json.loads((root / EXP / "data/audit/stop.json").read_text())["settled_at"]
    assert (f"stopping rule: settled at {n} of 12 queries (looks at "
            f"{', '.join(str(t) for t in range(4, n + 1, 4))}); people owe no further query "
            "of the human sample") in out
    assert "person-h (person): " in out and re.search(r"person-h \(person\): \d+ spent, 0 "
                                                      r"pending", out)
    again = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert again.returncode == 0 and "Pending:" not in again.stderr


def test_the_anytime_p_value_equals_an_independent_computation(stopped):
    _, folder, _, _, _ = stopped
    ppi = json.loads((folder / "metrics/ppi.json").read_text())
    stop = ppi["stop"]
    (row,) = stop["measures"][NDCG]
    order = stop["order"][:stop["settled_at"]]
    # people's nDCG@10 (gain 2^g - 1) under the truth: the ideal list is answer (2), pointer (1)
    idcg = 3 / np.log2(2) + 1 / np.log2(3)
    good = {True: (1 / np.log2(2) + 3 / np.log2(3)) / idcg, False: 1.0}   # pointer first?
    poor = (1 / np.log2(4) + 3 / np.log2(5)) / idcg                      # misses first
    d = np.array([good[q.endswith("01")] - poor for q in order])
    assert row["delta"] == pytest.approx(d.mean(), abs=1e-12)
    x = (d + 1) / 2
    log_k = _scalar_log_capital(list(x), 0.5, 0.05, stop["queries"])
    p = min(1.0, float(np.exp(-max(log_k))))
    assert row["p"] == pytest.approx(p, rel=1e-9, abs=1e-12)
    assert row["significant"] and row["p_holm"] <= 0.05


def test_the_comparison_is_decided_by_the_rule_and_the_report_says_where_it_stopped(stopped):
    _, folder, _, _, _ = stopped
    comps = json.loads((folder / "metrics/comparisons.json").read_text())
    n = json.loads((folder / "data/audit/stop.json").read_text())["settled_at"]
    (c,) = [c for c in comps["comparisons"] if c["measure"] == NDCG]
    assert c["estimator"] == "anytime" and c["significant"]
    assert f"settled at {n} of 12 queries" in c["verdict"]
    assert "ppi++" in c
    assert f"settled at {n} of 12 queries" in comps["estimator"]["note"]


def test_a_batch_size_of_zero_is_one_error_line(stopped):
    root, folder, _, _, _ = stopped
    text = (folder / "params.yaml").read_text()
    try:
        (folder / "params.yaml").write_text(text.replace("stop_batch: 4", "stop_batch: 0"))
        proc = tiny.run(root, "relgrade", "status", "--experiment", EXP, check=False)
        assert proc.returncode == 1
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("Error: ")
        assert "grading.stop_batch: must be an integer >= 1 (found 0)" in lines[0]
    finally:
        (folder / "params.yaml").write_text(text)

