"""The targeted re-check of a model judge: the stratified estimate and its intervals by hand
and against scikit-learn, the sample-size rule against finite differences, the seeded draw,
and the user's loop through the CLI on a real grading set-up (the test grader script and a
simulated person), with its bad input.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from relgrade.errors import InputError
from relgrade.io.judge_ledger import read_ledger
from relgrade.protocol.recheck import (draw_recheck, leniency_shift, plan_recheck,
                                       planning_table, stratified_calibration)
from tests.graders import experiment as ex
from tests.test_judge_ledger import edit_params, invoke, judge_line, root  # noqa: F401

Z = 1.959963984540054


# --- the estimate -------------------------------------------------------------------------

def test_a_two_stratum_estimate_and_its_leniency_interval_match_the_hand_computation():
    # the judge graded 80% of the frame 0 and 20% 1; people re-checked 4 pairs of the 0s
    # (one of them relevant) and 2 of the 1s (one not)
    graded = pd.DataFrame({"query_id": ["a", "a", "b", "b", "c", "c"],
                           "chunk_id": ["1", "2", "3", "4", "5", "6"],
                           "stratum": [0, 0, 0, 0, 1, 1], "model": [0, 0, 0, 0, 1, 1],
                           "human": [0, 0, 0, 1, 1, 0]})
    out = stratified_calibration(graded, {0: 0.8, 1: 0.2}, scale=[0, 1], relevant_min=1,
                                 level=0.95)
    # p = 0.8 [[3/4, 1/4], [0, 0]] + 0.2 [[0, 0], [1/2, 1/2]] = [[0.6, 0.2], [0.1, 0.1]]
    assert np.allclose(out["population"], [[0.6, 0.2], [0.1, 0.1]])
    # po 0.7, rows (0.8, 0.2), columns (0.7, 0.3): pe 0.62, kappa 0.08 / 0.38
    assert out["binary_kappa"]["value"] == pytest.approx(4 / 19)
    assert out["weighted_kappa"]["value"] == pytest.approx(4 / 19)  # two grades: the same
    # leniency 0.2 * (0 - 1) + 0.1 * (1 - 0); stratum variances of (model - human):
    # (0, 0, 0, -1) -> 1/4, (0, 1) -> 1/2; se^2 = 0.64 * (1/4) / 4 + 0.04 * (1/2) / 2
    le = out["leniency"]
    assert le["mean"] == pytest.approx(-0.1) and le["se"] == pytest.approx(math.sqrt(0.05))
    assert le["low"] == pytest.approx(-0.1 - Z * math.sqrt(0.05))
    assert (le["pairs"], le["queries"]) == (6, 3)
    assert out["strata"] == {"0": {"share": 0.8, "pairs": 4}, "1": {"share": 0.2, "pairs": 2}}


def test_a_census_of_every_stratum_gives_scikit_learns_kappas_of_the_whole_frame():
    rng = np.random.default_rng(5)
    human = rng.choice(3, size=300, p=[0.7, 0.2, 0.1])
    model = np.clip(human + rng.choice([-1, 0, 0, 0, 1], size=300), 0, 2)
    graded = pd.DataFrame({"query_id": [f"q{i // 10}" for i in range(300)],
                           "chunk_id": [str(i) for i in range(300)], "stratum": model,
                           "model": model, "human": human})
    shares = {g: float((model == g).mean()) for g in (0, 1, 2)}
    out = stratified_calibration(graded, shares, scale=[0, 1, 2], relevant_min=1, level=0.95)
    assert out["weighted_kappa"]["value"] == pytest.approx(
        cohen_kappa_score(model, human, weights="quadratic"))
    assert out["binary_kappa"]["value"] == pytest.approx(
        cohen_kappa_score(model >= 1, human >= 1))
    assert out["leniency"]["mean"] == pytest.approx((model - human).mean())
    wk = out["weighted_kappa"]
    assert wk["low"] < wk["value"] < wk["high"] and wk["method"] == "stratified-delta"


def test_a_stratum_with_one_graded_pair_has_no_interval_and_says_so():
    graded = pd.DataFrame({"query_id": ["a", "a", "b"], "chunk_id": ["1", "2", "3"],
                           "stratum": [0, 0, 1], "model": [0, 0, 1], "human": [0, 1, 1]})
    out = stratified_calibration(graded, {0: 0.5, 1: 0.5}, scale=[0, 1], relevant_min=1,
                                 level=0.95)
    assert out["leniency"]["se"] is None and out["weighted_kappa"]["low"] is None
    assert any("one graded pair" in n for n in out["notes"])


# --- the sample-size rule -------------------------------------------------------------------

def _kappa(p):
    k = p.shape[0]
    i = np.arange(k)
    w = 1 - (i[:, None] - i[None, :]) ** 2 / (k - 1) ** 2
    e = np.outer(p.sum(1), p.sum(0))
    return ((w * p).sum() - (w * e).sum()) / (1 - (w * e).sum())


def test_the_size_rule_is_z2_times_the_squared_neyman_spread_over_h2_by_finite_differences():
    counts = {0: 700, 1: 200, 2: 100}
    w = np.array([0.7, 0.2, 0.1])
    plan_t = planning_table([0, 1, 2], agreement=0.75)
    p = w[:, None] * plan_t
    # the gradient of weighted kappa by central differences, independent of the library's
    grad = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            d = np.zeros((3, 3))
            d[a, b] = 1e-6
            grad[a, b] = (_kappa(p + d) - _kappa(p - d)) / 2e-6
    sd = [math.sqrt(plan_t[s] @ grad[s] ** 2 - (plan_t[s] @ grad[s]) ** 2) for s in range(3)]
    want = math.ceil((Z * sum(w[s] * sd[s] for s in range(3)) / 0.1) ** 2)
    plan = plan_recheck(counts, scale=[0, 1, 2], relevant_min=1, planning=plan_t,
                        halfwidth=0.1, level=0.95, min_pairs=1, max_pairs=10_000)
    assert plan.rule_size == want and plan.size == want
    # Neyman: each stratum's share of the sample is w_s sd_s / sum_t w_t sd_t (rounded)
    spread = sum(w[s] * sd[s] for s in range(3))
    for s in range(3):
        assert plan.per_stratum[s] == pytest.approx(want * w[s] * sd[s] / spread, abs=1)
    assert plan.planned_halfwidth == pytest.approx(0.1, abs=0.002)


def test_the_size_is_held_within_the_floor_the_ceiling_and_the_frame_with_two_per_stratum():
    args = dict(scale=[0, 1, 2], relevant_min=1, planning=planning_table([0, 1, 2]),
                level=0.95)
    assert plan_recheck({0: 900, 1: 80, 2: 20}, halfwidth=0.01, min_pairs=10, max_pairs=120,
                        **args).size == 120
    small = plan_recheck({0: 900, 1: 80, 2: 20}, halfwidth=0.9, min_pairs=30, max_pairs=120,
                         **args)
    assert small.size == 30 and min(small.per_stratum.values()) >= 2
    tiny = plan_recheck({0: 5, 1: 1, 2: 0}, halfwidth=0.01, min_pairs=10, max_pairs=120, **args)
    assert tiny.per_stratum == {0: 5, 1: 1} and tiny.size == 6 and tiny.frame == 6
    for bad in ({"min_pairs": 0}, {"max_pairs": -3}, {"halfwidth": 0.0}):
        kw = {"halfwidth": 0.1, "min_pairs": 10, "max_pairs": 120} | bad
        with pytest.raises(InputError, match="must be > 0"):
            plan_recheck({0: 10}, **args, **kw)


def test_the_draw_takes_the_planned_pairs_of_each_stratum_and_repeats_with_its_seed():
    frame = pd.DataFrame({"query_id": [f"q{i // 10}" for i in range(100)],
                          "chunk_id": [f"c{i:03d}" for i in range(100)],
                          "grade": [0] * 80 + [1] * 15 + [2] * 5})
    plan = plan_recheck({0: 80, 1: 15, 2: 5}, scale=[0, 1, 2], relevant_min=1,
                        planning=planning_table([0, 1, 2]), halfwidth=0.2, level=0.95,
                        min_pairs=20, max_pairs=40)
    one = draw_recheck(frame, plan, rng=np.random.default_rng(3))
    two = draw_recheck(frame.sample(frac=1, random_state=1), plan, rng=np.random.default_rng(3))
    pd.testing.assert_frame_equal(one, two)  # row order of the frame does not matter
    assert one.groupby("stratum").size().to_dict() == plan.per_stratum
    graded = frame.set_index("chunk_id").loc[one["chunk_id"], "grade"].to_numpy()
    assert (graded == one["stratum"].to_numpy()).all()
    other = draw_recheck(frame, plan, rng=np.random.default_rng(4))
    assert not one.equals(other)


def test_a_leniency_shift_is_caught_when_its_interval_excludes_zero():
    s = leniency_shift({"mean": 0.25, "se": 0.06}, {"mean": 0.05, "se": 0.08}, level=0.95)
    assert s["shift"] == pytest.approx(0.2) and s["se"] == pytest.approx(0.1)
    assert s["low"] == pytest.approx(0.2 - Z * 0.1) and s["shifted"] is True
    assert leniency_shift({"mean": 0.1, "se": 0.06}, {"mean": 0.05, "se": 0.08},
                          level=0.95)["shifted"] is False
    assert leniency_shift({"mean": 0.1, "se": None}, {"mean": 0.0, "se": 0.1}, level=0.95) \
        is None


# --- the loop, through the CLI --------------------------------------------------------------

def _grades_table(root):
    """The grades stage's table of the set-up: grader-a's grade of every pool pair."""
    rows = [json.loads(x) for x in
            (root / "data/grades/grader-a/round-1.jsonl").read_text().splitlines()]
    (root / "data/graded").mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"query_id": [r["query_id"] for r in rows],
                  "chunk_id": [r["chunk_id"] for r in rows], "grader": "grader-a",
                  "grade": [r["grade"] for r in rows]}).to_parquet(
        root / "data/graded/grades.parquet", index=False)


def _new_template(root):
    """Edit the judge's script (the test grader in the tree): a new judge identity."""
    script = root / "tools/grader.py"
    script.write_text(script.read_text() + "# prompt: answer with the grade first\n")


def test_a_changed_judge_script_owes_a_recheck_that_the_cli_loop_draws_grades_and_records(
        root):  # noqa: F811
    assert invoke(root, "judge", "record").exit_code == 0  # the old identity, on the audit
    _grades_table(root)
    edit_params(root, **{"judges.recheck.min_pairs": 6, "judges.recheck.max_pairs": 9,
                         "graders.person-b.seconds_per_judgment": 40})
    _new_template(root)
    line = judge_line(invoke(root, "judge", "status").output)
    assert "no calibration recorded; owed: a re-check of " in line
    size = int(line.split("owed: a re-check of ")[1].split()[0])
    assert 6 <= size <= 9 and f" pairs of 28 stratified by the judge's grade (" in line
    assert f"; person-b owes {size} ({size * 40 / 3600:.2f} annotator-hours at 40 s each), " \
           f"the judge {size}: relgrade judge recheck --grader grader-a" in line
    status = invoke(root, "status").output
    assert f"owed: a re-check of {size} pairs of 28" in status

    res = invoke(root, "judge", "recheck", "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    draw_file = root / res.output.split("locked in ")[1].split()[0]
    draw = json.loads(draw_file.read_text())
    assert len(draw["pairs"]) == size and draw["stream"] == "judge-recheck"
    assert "relgrade grade run --grader grader-a --recheck" in judge_line(
        invoke(root, "judge", "status").output)
    # the key's grades stay as they are: the judge grades the re-check in its own file
    key_file = root / "data/grades/grader-a/round-1.jsonl"
    before = key_file.read_bytes()
    res = invoke(root, "grade", "run", "--grader", "grader-a", "--recheck", "--no-progress")
    assert res.exit_code == 0, res.output
    assert key_file.read_bytes() == before
    res = invoke(root, "packets", "export", "--recheck", "grader-a", "--out",
                 str(root / "recheck.jsonl"))
    assert res.exit_code == 0 and f"the {size} pairs person-b still owes" in res.output
    packets = [json.loads(x) for x in (root / "recheck.jsonl").read_text().splitlines()]
    pairs = sorted((p["query_id"], c["chunk_id"]) for p in packets for b in p["batches"]
                   for c in b)
    assert pairs == sorted((p["query_id"], p["chunk_id"]) for p in draw["pairs"])
    # people grade each pair one grade above the truth where the truth is 0
    rows = [{"query_id": q, "chunk_id": c, "reason": "read it",
             "grade": max(ex.truth(c), 1) if ex.truth(c) == 0 else ex.truth(c)}
            for q, c in pairs]
    # a pair outside the draw is refused with one Error line, nothing recorded
    outside = next(f"q0{i}-c{j}" for i in range(1, 5) for j in range(7)
                   if (f"q0{i}", f"q0{i}-c{j}") not in set(pairs))
    bad = root / "bad.jsonl"
    bad.write_text(json.dumps({"query_id": outside.split("-")[0], "chunk_id": outside,
                               "reason": "read it", "grade": 1}) + "\n")
    res = invoke(root, "grade", "import", str(bad), "--grader", "person-b", "--recheck",
                 "grader-a")
    assert res.exit_code == 1 and res.output.startswith("Error: ")
    assert len(res.output.strip().splitlines()) == 1
    people = root / "people.jsonl"
    people.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = invoke(root, "grade", "import", str(people), "--grader", "person-b", "--recheck",
                 "grader-a")
    assert res.exit_code == 0, res.output
    res = invoke(root, "judge", "record", "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    old, new = read_ledger(root / "judges/ledger.jsonl")
    assert new["pairs"] == size and new["recheck"]["seed"] == draw["seed"]
    # the test grader grades the truth; people graded every 0 as 1: the judge's leniency is
    # minus the frame's share of 0s, exactly (every stratum-0 pair differs by -1)
    share0 = draw["plan"]["shares"].get("0", 0.0)
    assert new["leniency"]["mean"] == pytest.approx(-share0)
    assert new["leniency_shift"]["against_judge"] == old["judge"]
    assert new["leniency_shift"]["shift"] == pytest.approx(-share0 - old["leniency"]["mean"])
    # recorded again: the same measurement, not appended twice
    res = invoke(root, "judge", "record", "--grader", "grader-a")
    assert res.exit_code == 0 and "already in" in res.output, res.output
    assert len(read_ledger(root / "judges/ledger.jsonl")) == 2
    out = invoke(root, "judge", "status").output
    assert f"identity {new['judge'][:12]}: calibrated" in judge_line(out)
    assert f"  {old['judge'][:12]} measured" in out and f"  {new['judge'][:12]} measured" in out


@pytest.mark.parametrize("key, value, rule", [
    ("min_pairs", 0, "must be an integer > 0"), ("min_pairs", -5, "must be an integer > 0"),
    ("max_pairs", 0, "must be an integer > 0"),
    ("kappa_halfwidth", 0, "must be a number > 0 and <= 1"),
    ("kappa_halfwidth", -0.1, "must be a number > 0 and <= 1")])
def test_a_recheck_size_param_of_zero_or_less_is_one_error_line(root, key, value,  # noqa: F811
                                                                rule):
    edit_params(root, **{f"judges.recheck.{key}": value})
    for args in (("judge", "status"), ("status",), ("judge", "recheck", "--grader", "grader-a")):
        res = invoke(root, *args)
        assert res.exit_code == 1 and res.output.startswith("Error: "), res.output
        assert len(res.output.strip().splitlines()) == 1
        assert f"judges.recheck.{key}" in res.output and rule in res.output
    assert not (root / "data/grades/grader-a/recheck").exists()


def test_a_floor_above_the_ceiling_is_one_error_line(root):  # noqa: F811
    edit_params(root, **{"judges.recheck.min_pairs": 60, "judges.recheck.max_pairs": 40})
    res = invoke(root, "judge", "status")
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1
    assert "min_pairs (60) must not exceed max_pairs (40)" in res.output


def test_a_hand_edited_draw_is_one_error_line_and_is_never_redrawn(root):  # noqa: F811
    _grades_table(root)
    edit_params(root, **{"judges.recheck.min_pairs": 6, "judges.recheck.max_pairs": 9})
    _new_template(root)
    res = invoke(root, "judge", "recheck", "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    draw_file = root / res.output.split("locked in ")[1].split()[0]
    d = json.loads(draw_file.read_text())
    d["pairs"][0].pop("stratum")
    draw_file.write_text(json.dumps(d))
    for args in (("judge", "recheck", "--grader", "grader-a"),
                 ("grade", "run", "--grader", "grader-a", "--recheck", "--no-progress")):
        res = invoke(root, *args)
        assert res.exit_code == 1 and res.output.startswith("Error: "), res.output
        assert len(res.output.strip().splitlines()) == 1 and "draw.json" in res.output
    assert json.loads(draw_file.read_text()) == d  # left as it was


def test_a_calibrated_identity_owes_no_recheck_and_draws_nothing_unless_asked_again(
        root):  # noqa: F811
    # the identity now is calibrated on the audit's 14 pairs, measured today
    assert invoke(root, "judge", "record").exit_code == 0
    _grades_table(root)
    edit_params(root, **{"judges.recheck.min_pairs": 6, "judges.recheck.max_pairs": 9})
    judge = read_ledger(root / "judges/ledger.jsonl")[0]["judge"]
    assert f"identity {judge[:12]}: calibrated (measured 0 days ago)" in judge_line(
        invoke(root, "judge", "status").output)
    res = invoke(root, "judge", "recheck", "--grader", "grader-a")
    assert res.exit_code == 0, res.output
    assert res.output == (f"re-check of grader-a identity {judge[:12]}: calibrated (measured "
                          "0 days ago); nothing owed, nothing drawn (a re-measurement anyway: "
                          "relgrade judge recheck --grader grader-a --again)\n")
    assert not (root / "data/grades/grader-a/recheck").exists()
    # judge record still finds the same measurement: no draw stands in its way
    res = invoke(root, "judge", "record", "--grader", "grader-a")
    assert res.exit_code == 0 and "already in" in res.output, res.output
    # --again: the periodic re-measurement is drawn under the identity's second tag
    res = invoke(root, "judge", "recheck", "--grader", "grader-a", "--again")
    assert res.exit_code == 0, res.output
    draw_file = root / f"data/grades/grader-a/recheck/{judge[:12]}-2/draw.json"
    assert f"drawn and locked in {draw_file.relative_to(root).as_posix()}" in res.output
    assert 6 <= len(json.loads(draw_file.read_text())["pairs"]) <= 9
    # once drawn, the plain command prints the draw it owes (not "nothing owed")
    res = invoke(root, "judge", "recheck", "--grader", "grader-a")
    assert res.exit_code == 0 and "already drawn in" in res.output, res.output
