"""End to end: the simulated crowd of experiments/crowd-sim through `dvc repro`.

The experiment is copied into a temporary git + dvc repository (tests/e2e/shipped.py; the
copy, run to its pool and through both turns below, is built once per test run and
shared) with a clone's top, the stage scripts and
the sources, with its inputs (the simulated query log, the sampled query set and the intents
written for it, the truth, the gold) and the committed grade files of its five simulated
raters and its simulated auditor (made by `relgrade grade run` through sim/rater.py) but not
the expert's; the gold file is private, so it is rebuilt by sim/make_gold.py after `dvc repro`
of the pool stage. The first full `dvc repro` runs packets -> grades ->
aggregate and stops at adjudicate, naming the expert's pending pairs (Pending, not Error); `relgrade grade run
--grader expert-e` grades the queue through real subprocesses; the second full `dvc repro`
runs through the key to the arms' metrics (and on to the report). Checks: the sample stage
draws the committed query set with its traffic weights and records its seed; the spammer is removed by gold and nobody else; the key
recovers the truth at the rate the confusion matrices predict; the expert's fresh grades
equal the committed ones; the arms' metrics carry traffic-weighted means.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml

from relgrade import query_sampling as querylog
from relgrade.rng import derive_seed
from tests.e2e import shipped, tiny

pytestmark = [pytest.mark.slow]

EXP = "experiments/crowd-sim"


@pytest.fixture(scope="module")
def crowd(tmp_path_factory, crowd_sim_adjudicated, crowd_sim_reported):
    # the copy (tests.e2e.shipped) with sample -> pool run, given a clone's top, then the
    # loop's first turn: the full `dvc repro` (stopped at adjudication), `relgrade status`
    # there and the expert's `relgrade grade run --grader expert-e --experiment EXP` its
    # Pending line names; and its second turn: the full `dvc repro` again, now through the
    # key to the arms' metrics and the report. Both turns are shared with the refresh module
    # (tests/conftest.py); this module works on its own copy of the result
    root = tiny.copy_repo(crowd_sim_reported / "repo", tmp_path_factory.mktemp("crowd"))
    exp = root / EXP
    # the gold file is private: the gold stage writes it from the pool and the simulation's
    # truth (params gold.command), a DVC-cached output, in the same dvc repro
    first = shipped.crowd_first(crowd_sim_adjudicated)  # stdout: sample -> pool ran first
    status_before = (crowd_sim_adjudicated / "status.txt").read_text()
    second = shipped.crowd_second(crowd_sim_reported)
    return exp, first, second, status_before


def test_the_first_repro_stops_at_adjudication_naming_the_experts_pairs(crowd):
    exp, first, _, before = crowd
    assert first.returncode != 0
    queue = [json.loads(x) for x in (exp / "data/aggregate/queue.jsonl").read_text().splitlines()]
    queries = sorted({r["query_id"] for r in queue})
    assert (f"Pending: grading: {len(queue)} pairs need expert-e (adjudication queries "
            f"{', '.join(queries)}); run `relgrade grade run --grader expert-e") in first.stderr
    assert (f"adjudication: {len(queue)} queued pairs owed by expert-e "
            f"(queries {', '.join(queries)})") in before
    assert "Running stage 'experiments/crowd-sim/dvc.yaml:key'" not in first.stdout


def test_the_sample_stage_draws_the_query_set_with_traffic_weights_and_its_seed(crowd):
    exp, first, *_ = crowd
    assert "Running stage 'experiments/crowd-sim/dvc.yaml:sample'" in first.stdout
    manifest = json.loads((exp / "data/queries/sample.json").read_text())
    assert (manifest["seed"], manifest["seed_purpose"]) == (0, "queries-sample")
    assert manifest["child_seed"] == derive_seed(0, "queries-sample")
    assert (manifest["issued"], manifest["distinct"], manifest["n"]) == (2396, 24, 12)
    sampled = pd.read_csv(exp / "data/input/queries.sampled.tsv", sep="\t")
    committed = pd.read_csv(tiny.REPO / EXP / "data/input/queries.sampled.tsv", sep="\t")
    pd.testing.assert_frame_equal(sampled, committed)
    # By hand from data/input/query-log.tsv (2396 issued; cuts at 1198 and 1916.8), 12 drawn
    # with an equal allocation: the head is 714 + 276 + 231 = 1221 issued, all three taken,
    # each weighing its own count; its fourth draw goes to the torso, 8 queries of 712
    # issued, which gives 5: "job lease lock" (143 issued; 5 * 143 >= 712) is taken with
    # certainty and weighs its own count, the other 4 share the rest, (712 - 143) / 4 =
    # 142.25 each (4 * 126, the next count, is below 569: no second certainty); the tail, 13
    # queries of 463 issued (at most 43 each: 4 * 43 < 463), gives 4, each weighing 463 / 4.
    weights = dict(zip(sampled["query"], sampled["weight"]))
    assert [weights[q] for q in ("lease jobs to workers", "higher priority jobs",
                                 "worker heartbeat", "job lease lock")] == [714.0, 276.0, 231.0,
                                                                            143.0]
    assert sorted(sampled["group"].value_counts().items()) == [("head", 3), ("tail", 4),
                                                               ("torso", 5)]
    torso = sampled[(sampled["group"] == "torso") & (sampled["query"] != "job lease lock")]
    assert torso["weight"].tolist() == pytest.approx([(712 - 143) / 4] * 4)
    assert sampled.loc[sampled["group"] == "tail", "weight"].tolist() == pytest.approx(
        [463 / 4] * 4)
    assert sampled["weight"].sum() == pytest.approx(2396.0)
    # the same draw again from the log with the recorded child seed
    log = pd.read_csv(exp / "data/input/query-log.tsv", sep="\t")
    again = querylog.sample_queries(querylog.strata(log), n=12,
                                    rng=np.random.default_rng(manifest["child_seed"]))
    assert again["query_id"].tolist() == sampled["query_id"].tolist()
    # the queries stage keeps the weights; the key covers exactly these queries
    table = pd.read_parquet(exp / "data/queries/queries.parquet")
    assert dict(zip(table["query_id"], table["weight"])) == dict(zip(sampled["query_id"],
                                                                     sampled["weight"]))
    key = pd.read_json(exp / "data/key/key.jsonl", lines=True)
    assert set(key["query_id"]) == set(sampled["query_id"])


def test_the_spammer_alone_is_removed_by_gold(crowd):
    exp, *_ = crowd
    report = json.loads((exp / "metrics/aggregate.json").read_text())
    assert list(report["removed"]) == ["rater-5"]
    assert report["removed"]["rater-5"].startswith("removed: gold accuracy ")
    acc = report["accuracy"]
    assert acc["rater-5"]["accuracy"] < 0.6 <= min(acc[r]["accuracy"]
                                                   for r in ("rater-1", "rater-2", "rater-3",
                                                             "rater-4"))
    # 64 gold questions (round(0.4 * 159)), each in 3 queues like every pair: 192 gold rows
    # over 5 raters, 38 or 39 each
    queues = pd.read_parquet(exp / "data/private/assignment.parquet")
    assert queues["work"].all()
    assert queues.groupby(["query_id", "chunk_id"]).size().eq(3).all()
    assert int(queues.groupby(["query_id", "chunk_id"])["gold"].first().sum()) == 64
    assert sorted(queues.groupby("grader")["gold"].sum()) == [38, 38, 38, 39, 39]
    assert all(a["gold_answers"] >= 4 for a in acc.values())


def _expected_correct(exp):
    """Expected exact matches of the key with the truth, from the confusion matrices."""
    crowd = yaml.safe_load((exp / "sim/crowd.yaml").read_text())["graders"]
    truth = pd.read_csv(exp / "data/input/truth.tsv", sep="\t")
    true = {(q, c): int(g) for q, c, g in zip(truth.query_id, truth.chunk_id, truth.grade)}
    queues = pd.read_parquet(exp / "data/private/assignment.parquet")
    removed = json.loads((exp / "metrics/aggregate.json").read_text())["removed"]
    work = queues[queues["work"] & ~queues["grader"].isin(list(removed))]
    params = yaml.safe_load((exp / "params.yaml").read_text())
    max_spread = params["adjudication"]["max_spread"]
    expert = np.array(crowd["expert-e"])
    probs = []
    for (q, c), g in work.groupby(["query_id", "chunk_id"]):
        t = true.get((q, c), 0)
        rows = [np.array(crowd[r])[t] for r in g["grader"]]
        p = 0.0
        for combo in itertools.product(range(3), repeat=len(rows)):
            weight = float(np.prod([row[x] for row, x in zip(rows, combo)]))
            values, counts = np.unique(combo, return_counts=True)
            tie = (counts == counts.max()).sum() > 1
            if tie or max(combo) - min(combo) > max_spread:
                p += weight * expert[t, t]      # the expert's grade stands
            else:
                p += weight * float(values[np.argmax(counts)] == t)
        probs.append(p)
    return np.array(probs)


def test_the_key_recovers_the_truth_at_the_rate_the_confusion_matrices_predict(crowd):
    exp, *_ = crowd
    key = pd.read_json(exp / "data/key/key.jsonl", lines=True, dtype={"grade": int})
    truth = pd.read_csv(exp / "data/input/truth.tsv", sep="\t").rename(columns={"grade": "t"})
    joined = key.merge(truth, how="left", on=["query_id", "chunk_id"]).fillna({"t": 0})
    observed = int((joined["grade"] == joined["t"]).sum())
    p = _expected_correct(exp)
    assert len(p) == len(key) == 159  # 12 queries, bm25's, tfidf's and random's top 7 each
    expected, sd = p.sum(), np.sqrt((p * (1 - p)).sum())
    assert abs(observed - expected) <= 3 * sd, (observed, expected, sd)


def test_the_experts_grades_are_the_committed_ones_and_replace_the_aggregate(crowd):
    exp, *_ = crowd
    fresh = (exp / "data/grades/expert-e/round-1.jsonl").read_text().splitlines()
    committed = (tiny.REPO / EXP / "data/grades/expert-e/round-1.jsonl").read_text().splitlines()
    assert sorted(fresh) == sorted(committed)
    prov = [json.loads(x) for x in (exp / "data/aggregate/adjudication.jsonl").read_text()
            .splitlines()]
    key = {(r["query_id"], r["chunk_id"]): r["grade"] for r in
           (json.loads(x) for x in (exp / "data/key/key.jsonl").read_text().splitlines())}
    assert prov and all(key[(r["query_id"], r["chunk_id"])] == r["grade"] for r in prov)


def test_the_second_repro_runs_from_the_grades_to_the_metrics(crowd):
    exp, _, second, _ = crowd
    stages = [line.split("'")[1].split(":")[-1] for line in second.stdout.splitlines()
              if line.startswith("Running stage")]
    # the expert's new file reruns the grades stage and all that follows, in this order
    # (a fresh repository may rerun the pool too: dvc writes data/runs/.gitignore late)
    wanted = ["grades", "aggregate", "adjudicate", "agreement", "gate", "key"]
    assert [s for s in stages if s in wanted] == wanted
    assert {"metrics@bm25", "metrics@tfidf"} <= set(stages)
    record = json.loads((exp / "data/key/record.json").read_text())
    for arm in ("bm25", "tfidf"):
        metrics = json.loads((exp / f"metrics/arms/{arm}.json").read_text())
        assert metrics["key_sha256"] == record["key_sha256"]


def test_the_arms_metrics_carry_traffic_weighted_means(crowd):
    exp, *_ = crowd
    queries = pd.read_parquet(exp / "data/queries/queries.parquet")
    weight = dict(zip(queries["query_id"], queries["weight"]))
    for arm in ("bm25", "tfidf"):
        metrics = json.loads((exp / f"metrics/arms/{arm}.json").read_text())
        block = metrics["traffic_weighted"]
        assert block["weight_sum"] == pytest.approx(2396.0)
        # sum_i w_i v_i / sum_i w_i over the per-query values, computed here
        per_query = pd.read_parquet(exp / f"data/metrics/{arm}.parquet")
        measure = "nDCG(dcg='exp-log2')@10"
        rows = per_query[per_query["measure"] == measure]
        assert sorted(rows["query_id"]) == sorted(weight)
        w = rows["query_id"].map(weight).to_numpy()
        v = rows["value"].to_numpy()
        assert block["means"][measure] == pytest.approx(float((w * v).sum() / w.sum()))


def test_a_rater_removed_on_gold_owes_nothing_after_a_chunk_edit(crowd, tmp_path):
    # a copy: the edit must not reach the module's other tests
    exp0, *_ = crowd
    root = tmp_path / "repo"
    shutil.copytree(exp0.parents[1], root, symlinks=True)
    exp = root / EXP
    queues = pd.read_parquet(exp / "data/private/assignment.parquet")
    # a chunk in the removed spammer's queue, and so in two other raters' queues
    mine = queues[queues["grader"] == "rater-5"].sort_values(["query_id", "chunk_id"])
    chunk = str(mine["chunk_id"].iloc[0])
    holders = queues[queues["chunk_id"] == chunk]
    (tmp_path / "text.txt").write_text("An edited passage about nothing in particular.\n")
    tiny.run(root, "relgrade", "corpus", "edit", chunk, "--text-file",
             str(tmp_path / "text.txt"), "--experiment", EXP)
    tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:corpus", f"{EXP}/dvc.yaml:packets")
    out = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml:grades", check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "Pending:" in text, text
    owed = tiny.run(root, "relgrade", "status", "--experiment", EXP).stdout
    others = sorted(set(holders["grader"]) - {"rater-5"})
    assert others and all(g.startswith("rater-") for g in others)
    pending = {m.group(1): int(m.group(2)) for m in
               re.finditer(r"^\s*(\S+) \(model\): \d+ spent, (\d+) pending", owed, re.M)}
    for g in others:  # the kept raters who hold the pair owe it again (stale)
        assert pending[g] >= 1, owed
    assert pending["rater-5"] == 0, owed  # removed on gold: dealt nothing again
    assert "rater-5" not in text.split("Pending:", 1)[1], text
