"""End to end: a prediction-powered experiment made by `relgrade init --mode ppi`, run by the
user's loop alone (`dvc repro`, the commands its Pending line names, `dvc repro`), and its
metrics/ppi.json checked against an independent recomputation with ppi-python from the
per-query values the metrics stage wrote.

The model grader is lenient on purpose (tests/graders/lenient_grader.py: one grade more on
40% of the pairs, one less on some relevant ones); the human grader reads the fixture's truth
(tests/graders/tiny_grader.py). Bad input refused: a human grader named like the model grader,
a fraction outside (0, 1], a sample locked on queries the pool no longer holds.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from markupsafe import escape
from scipy import stats as sps

from tests.e2e import tiny
from tests.test_e2e_init_modes import _bare, _loop, _repo, _turn

pytestmark = [pytest.mark.slow]

GRADERS = Path(__file__).with_name("graders")
MODEL = f"{sys.executable} {GRADERS / 'lenient_grader.py'}"
HUMAN = f"{sys.executable} {GRADERS / 'tiny_grader.py'}"
NDCG = "nDCG(dcg='exp-log2')@10"


def _init(root, exp, *args):
    return tiny.run(root, "relgrade", "init", exp, "--corpus", "data/input/chunks.jsonl",
                    "--queries", "data/input/queries.tsv", "--intents", "data/input/intents.tsv",
                    "--arm", "bm25=bm25", "--arm", "tfidf=tfidf", "--pool-depth", "3",
                    "--grader", "model-m", "--grader-command", MODEL, "--auditor", "person-h",
                    "--auditor-command", HUMAN, "--mode", "ppi", *args)


EXP = "experiments/ppi"


def build_graded(folder):
    """The tiny experiment's inputs in a new git + DVC repository ``folder / "repo"``, the
    ppi experiment :data:`EXP` made in it by ``relgrade init --mode ppi --human-fraction 0.5``
    (the lenient model grader model-m, the human grader person-h), the pipeline checked, the
    intents reviewed, and the first turn of the user's loop taken: ``dvc repro`` stops at the
    grading owed and both ``relgrade grade run`` commands its Pending line names are run. No
    stage after the grades has run, so the gate and the ppi stage run first in a copy.

    The Pending lines of that ``dvc repro`` are kept in ``folder / "pending.json"`` (a JSON
    list of str). Copy ``folder / "repo"`` (``tiny.copy_repo``) to change it; the session
    fixture ``ppi_graded`` (tests/conftest.py) builds it once per test run for this module
    and tests/test_e2e_judge_ledger.py."""
    root = folder / "repo"
    root.mkdir()
    _bare(root)
    _init(root, EXP, "--human-fraction", "0.5")
    tiny.run(root, "relgrade", "pipeline", "check", "--experiment", EXP)
    tiny.run(root, "relgrade", "intents", "review", "--experiment", EXP, "--reviewer",
             "person-h")
    pending = _turn(root, EXP)
    assert pending, "the first dvc repro of a ppi experiment completed without any grade"
    (folder / "pending.json").write_text(json.dumps(pending))


@pytest.fixture(scope="module")
def ppi_run(tmp_path_factory, ppi_graded):
    # the first turn of the loop (dvc repro, the grading it names) is ppi_graded's
    root = tiny.copy_repo(ppi_graded / "repo", tmp_path_factory.mktemp("ppi"))
    seen = json.loads((ppi_graded / "pending.json").read_text())
    seen += _loop(root, EXP, rounds=3)
    return root, root / EXP, seen


def _values(folder, arm, queries, sample=None):
    t = pd.read_parquet(folder / "data/metrics" / f"{arm}.parquet")
    t = t[t["measure"] == NDCG]
    return pd.Series(t["value"].to_numpy(float), index=t["query_id"].astype(str)) \
        .reindex(queries).fillna(0.0).to_numpy()


def test_the_loop_asks_the_model_for_every_pair_and_people_for_the_sample(ppi_run):
    _, folder, seen = ppi_run
    assert "need model-m" in seen[0]
    sample = json.loads((folder / "metrics/ppi.json").read_text())["design"]["human_sample"]
    assert len(sample) == 6  # half of the 12 pooled queries
    assert all(q in seen[0] for q in sample)  # the Pending line names the audit queries
    report = (folder / "metrics/report.md").read_text()
    assert "## Prediction-powered estimates" in report and "### Judge audit" in report
    assert "### Judging budget" in report
    assert (folder / "metrics/plots/budget.csv").read_text().startswith("budget,")


def test_ppi_json_equals_ppi_python_on_the_per_query_values(ppi_run):
    ppi_py = pytest.importorskip("ppi_py")
    _, folder, _ = ppi_run
    out = json.loads((folder / "metrics/ppi.json").read_text())
    design, est = out["design"], out["estimates"][NDCG]
    pool = pd.read_parquet(folder / "data/pool/pool.parquet")
    queries = sorted(set(pool["query_id"].astype(str)))
    sample = design["human_sample"]
    grades = pd.read_parquet(folder / "data/graded/grades.parquet")
    human_key = grades[(grades["grader"] == "person-h") & grades["query_id"].isin(sample)]
    # the human key's per-query nDCG@10, recomputed with ir_measures-free arithmetic below
    from relgrade.evaluation.metrics import evaluate_arm
    from relgrade.io.runs import read_run

    ys, yhats, fs = [], [], []
    for arm in ("bm25", "tfidf"):
        f = _values(folder, arm, queries)
        run = read_run(folder / "data/runs" / f"{arm}.trec")
        _, table = evaluate_arm(key=human_key[["query_id", "chunk_id", "grade"]],
                                run=run[run["query_id"].isin(sample)], cutoffs=[3, 5, 10])
        t = table[table["measure"] == NDCG]
        y = pd.Series(t["value"].to_numpy(float), index=t["query_id"]).reindex(sample) \
            .fillna(0.0).to_numpy()
        ys.append(y)
        yhats.append(f[[queries.index(q) for q in sample]])
        fs.append(f)
    y2, yhat2, f2 = np.array(ys), np.array(yhats), np.array(fs)
    # the default (jackknife) interval: one lambda for both arms, ppi-python's power tuning
    # of a vector mean (lam_optim_mode="overall")
    points = np.ravel(ppi_py.ppi_mean_pointestimate(y2.T, yhat2.T, f2.T, lam=None))
    n, big_n = len(sample), len(queries)
    for i, arm in enumerate(("bm25", "tfidf")):
        y, yhat, f = y2[i], yhat2[i], f2[i]
        row = est["arms"][arm]
        lam_hat = row["ppi++"]["lambda"]
        point = ppi_py.ppi_mean_pointestimate(y, yhat, f, lam=lam_hat)
        assert row["ppi++"]["estimate"] == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
        assert row["ppi++"]["estimate"] == pytest.approx(points[i], abs=1e-9)
        assert row["model-only"]["estimate"] == pytest.approx(f.mean(), abs=1e-12)
        assert row["human-only"]["estimate"] == pytest.approx(y.mean(), abs=1e-12)
        # the jackknife over the sample queries (lambda re-tuned without each), plus the
        # model term, Student's t on n - 1, capped at the human-only standard error
        assert row["ppi++"]["interval"] == "jackknife" and row["ppi++"]["df"] == n - 1
        loo = []
        for j in range(n):
            keep = np.arange(n) != j
            loo.append(np.ravel(ppi_py.ppi_mean_pointestimate(
                y2[:, keep].T, yhat2[:, keep].T, f2.T, lam=None))[i])
        loo = np.array(loo)
        se = np.sqrt((n - 1) / n * ((loo - loo.mean()) ** 2).sum()
                     + lam_hat ** 2 * f.var(ddof=1) / big_n)
        se_human = y.std(ddof=1) / np.sqrt(n)
        # a human-only standard error within 1e-12 of the values' scale is 0 (people gave
        # one value on every sampled query, up to float noise): nothing caps PPI++ there,
        # and the row says it is wider than human-only
        spread = se_human > 1e-12 * np.abs(y).max()
        assert row["ppi++"]["capped"] == bool(se > se_human and spread)
        assert row["ppi++"].get("wider_than_human_only", False) == bool(
            se > se_human and not spread)
        se = min(se, se_human) if spread else se
        half = sps.t.ppf(0.975, n - 1) * se
        assert row["ppi++"]["low"] == pytest.approx(row["ppi++"]["estimate"] - half, abs=1e-9)
        assert row["ppi++"]["high"] == pytest.approx(row["ppi++"]["estimate"] + half, abs=1e-9)
    assert design["seed"] == 0 and design["sample_stream"] == "ppi-sample"
    assert design["interval"] == "jackknife" and "jackknife" in design["interval_words"]
    assert "one lambda tuned over all arms" in design["rectifier"]
    assert len(est["differences"]) == 1 and "p_holm" in est["differences"][0]["ppi++"]
    # the one difference's lambda: the smaller of the differences' shared lambda and its
    # own, which for a single difference are the same: ppi-python's element-wise tuning
    # the difference as the comparison is made: arm_a - arm_b (here tfidf - bm25, the arm
    # against the baseline of metrics.pairs)
    diff = est["differences"][0]
    a, b = (("bm25", "tfidf").index(diff[k]) for k in ("arm_a", "arm_b"))
    assert (diff["arm_a"], diff["arm_b"]) == ("tfidf", "bm25")
    d_y, d_yhat, d_f = y2[a] - y2[b], yhat2[a] - yhat2[b], f2[a] - f2[b]
    d_point = ppi_py.ppi_mean_pointestimate(d_y, d_yhat, d_f, lam=None,
                                            lam_optim_mode="element")
    assert est["differences"][0]["ppi++"]["estimate"] == pytest.approx(
        float(np.ravel(d_point)[0]), abs=1e-9)


def test_in_ppi_mode_the_rank_sets_rest_on_the_ppi_estimates(ppi_run):
    _, folder, _ = ppi_run
    ppi = json.loads((folder / "metrics/ppi.json").read_text())
    ranks = ppi["rank_sets"][NDCG]
    assert ranks["human_queries"] == len(ppi["design"]["human_sample"])
    assert ranks["stream"] == f"ppi-rank-sets {NDCG}" and ranks["seed"] == 0
    report = (folder / "metrics/report.md").read_text()
    assert "## Rank-sets" in report and "From PPI++ estimates" in report
    for arm in ("bm25", "tfidf"):
        # the shared lambda of the arms: the PPI++ estimate of the ppi table
        assert ranks["arms"][arm]["estimate"] == pytest.approx(
            ppi["estimates"][NDCG]["arms"][arm]["ppi++"]["estimate"], abs=1e-12)
        summary = json.loads((folder / f"metrics/decision/{arm}.json").read_text())
        assert (summary["rank_low"], summary["rank_high"]) == (
            ranks["arms"][arm]["rank_low"], ranks["arms"][arm]["rank_high"])
    # comparisons.json's rank-sets are the ones that decide, the model key's beside them
    compared = json.loads((folder / "metrics/comparisons.json").read_text())["rank_sets"]
    assert compared["estimator"] == "ppi++"
    assert {k: v for k, v in compared.items() if k not in ("estimator", "model_only")} == ranks
    assert compared["model_only"]["estimator"] == "model-only"
    assert compared["model_only"]["stream"] == "rank-sets"
    assert compared["model_only"]["measure"] == NDCG


def test_the_key_record_names_the_sample_and_the_gate_rule(ppi_run):
    _, folder, _ = ppi_run
    record = json.loads((folder / "data/key/record.json").read_text())
    sample = json.loads((folder / "metrics/ppi.json").read_text())["design"]["human_sample"]
    assert record["ppi"]["human_sample"] == sample
    assert record["ppi"]["key_grader"] == "model-m"
    assert "do not gate the estimates" in record["ppi"]["gate"]


def test_a_sample_locked_outside_the_pool_is_refused(ppi_run):
    root, folder, _ = ppi_run
    from relgrade.errors import InputError
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.stages.ppi import human_sample_ids

    ex = Experiment.load(folder / "params.yaml")
    with pytest.raises(InputError) as e:
        human_sample_ids(ex, ["kw01", "kw02"])
    assert "the human sample must be a subset of the pool's queries" in str(e.value)
    assert "lock.json" in str(e.value)


def test_a_sample_too_small_for_the_interval_is_refused_naming_the_lock(ppi_run):
    _, folder, _ = ppi_run
    from relgrade.errors import InputError
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.stages.ppi import human_sample_ids

    ex = Experiment.load(folder / "params.yaml")
    pool = pd.read_parquet(folder / "data/pool/pool.parquet")
    queries = sorted(set(pool["query_id"].astype(str)))
    assert len(human_sample_ids(ex, queries, minimum=3)) == 6
    with pytest.raises(InputError) as e:
        human_sample_ids(ex, queries, minimum=7)   # the locked sample holds 6
    assert "needs a human sample of at least 7 queries" in str(e.value)
    assert "lock.json" in str(e.value) and "found 6" in str(e.value)
    # a round's sample cannot grow: the fix names the params key, the file and a new round
    assert ("start a new round, with grading.round: 2 and a ppi.human_fraction in "
            "experiments/ppi/params.yaml that gives at least 7 queries") in str(e.value)
    assert "ppi.interval: t" not in str(e.value)


def test_an_arm_of_one_value_on_the_sample_is_told_a_larger_sample_is_a_new_round(ppi_run):
    _, folder, _ = ppi_run
    from relgrade.errors import InputError
    from relgrade.evaluation.ppi_table import ppi_table
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.stages.ppi import larger_sample_fix

    ex = Experiment.load(folder / "params.yaml")
    fix = larger_sample_fix(ex)
    # what the lock allows (raising the share alone is refused, as tested above): a new round
    assert fix == ("Round 1's human sample is locked (raising ppi.human_fraction alone is "
                   "refused), so a larger sample is a new round: set grading.round: 2 and a "
                   "larger ppi.human_fraction (now 0.5) in experiments/ppi/params.yaml; its "
                   "sample is drawn before the model grades that round, and round 1's grades "
                   "stay in git")
    model = pd.DataFrame([[1.0, 1.0, 1.0, 0.0]], index=["bm25"], columns=["q1", "q2", "q3", "q4"])
    with pytest.raises(InputError) as e:
        ppi_table(model, model[["q1", "q2", "q3"]], measure=NDCG, larger_sample=fix)
    assert str(e.value).endswith(f"can hold queries of other values. {fix}")


def test_init_refuses_a_human_grader_named_like_the_model_and_a_bad_fraction(tmp_path_factory):
    root = _repo(tmp_path_factory, "ppi-refused")
    same = tiny.run(root, "relgrade", "init", "experiments/x", "--corpus",
                    "data/input/chunks.jsonl", "--queries", "data/input/queries.tsv",
                    "--intents", "data/input/intents.tsv", "--arm", "bm25=bm25", "--mode",
                    "ppi", "--grader", "m", "--auditor", "m", "--grader-command", MODEL,
                    check=False)
    assert same.returncode == 1
    assert "must not be the model grader" in same.stderr
    bad = tiny.run(root, "relgrade", "init", "experiments/y", "--corpus",
                   "data/input/chunks.jsonl", "--queries", "data/input/queries.tsv",
                   "--intents", "data/input/intents.tsv", "--arm", "bm25=bm25", "--mode",
                   "ppi", "--grader-command", MODEL, "--human-fraction", "1.5", check=False)
    assert bad.returncode == 1
    assert "the human fraction must lie in (0, 1]" in bad.stderr
    assert not (root / "experiments/x").exists() and not (root / "experiments/y").exists()


# --- PPI++ decides; the sample is locked once the model has graded -------------------------

def test_ppi_decides_the_report_the_decision_files_and_dvc_metrics_show(ppi_run):
    root, folder, _ = ppi_run
    est = json.loads((folder / "metrics/ppi.json").read_text())["estimates"][NDCG]
    diff = est["differences"][0]
    # the experiment's comparison, tfidf against the baseline bm25 (metrics.pairs: baseline)
    assert (diff["arm_a"], diff["arm_b"]) == ("tfidf", "bm25")
    comparisons = json.loads((folder / "metrics/comparisons.json").read_text())
    assert comparisons["estimator"]["decides"] == "ppi++"
    c = next(c for c in comparisons["comparisons"] if c["measure"] == NDCG)
    assert (c["arm_a"], c["arm_b"], c["estimator"]) == ("tfidf", "bm25", "ppi++")
    assert (c["delta"], c["low"], c["high"], c["p_holm"], c["significant"]) == (
        diff["ppi++"]["estimate"], diff["ppi++"]["low"], diff["ppi++"]["high"],
        diff["ppi++"]["p_holm"], diff["ppi++"]["significant"])
    assert c["human_only"]["delta"] == diff["human-only"]["estimate"]
    # the model key's own (bootstrap, randomization) comparison, labelled, beside it
    assert c["model_only"]["interval"] != c["interval"] and "p_randomization" in c["model_only"]
    files = {p.stem: json.loads(p.read_text())
             for p in sorted((folder / "metrics/decision").glob("*.json"))}
    for arm in ("bm25", "tfidf"):
        row = est["arms"][arm]
        assert files[arm]["estimator"] == "ppi++"
        assert (files[arm]["mean"], files[arm]["low"], files[arm]["high"]) == (
            row["ppi++"]["estimate"], row["ppi++"]["low"], row["ppi++"]["high"])
        assert files[arm]["model_only_mean"] == comparisons["arms"][arm][NDCG]["model_only"][
            "estimate"]
        assert files[arm]["human_only_mean"] == row["human-only"]["estimate"]
        assert files[arm]["human_queries"] == est["n"] == 6
    assert (files["tfidf"]["delta"], files["tfidf"]["p_holm"]) == (
        diff["ppi++"]["estimate"], diff["ppi++"]["p_holm"])
    # the report's headline verdict is the PPI section's, and says which number decides
    report = (folder / "metrics/report.md").read_text()
    headline = report.split("## Verdicts")[1].split("## Judged@k")[0]
    assert f"- {c['verdict']}" in headline and "(PPI++, people on 6 of 12 queries)" in headline
    assert "Decided by PPI++" in headline
    section = report.split("## Prediction-powered estimates")[1]
    sig = "yes" if diff["ppi++"]["significant"] else "no"
    assert f"| tfidf − bm25 | {diff['ppi++']['estimate']:.4f}"[:20] in section
    assert f"| {diff['ppi++']['p_holm']:.3f} | {sig} |" in section
    # what `dvc metrics show` prints: the same numbers
    shown = json.loads(tiny.run(root, "dvc", "metrics", "show", "--json",
                                "experiments/ppi/metrics/decision").stdout)
    data = next(iter(shown.values()))["data"]
    for path, got in data.items():
        arm = Path(path).stem
        assert got["data"]["mean"] == files[arm]["mean"]
        assert got["data"]["estimator"] == "ppi++"
    out = tiny.run(root, "relgrade", "metrics", "show", "--experiment",
                   "experiments/ppi").stdout
    assert "estimator: ppi++ (people on 6 queries" in out
    assert f"{files['tfidf']['mean']:.4f}" in out
    # `relgrade compare` recomputes the model key's statistics: labelled as such
    ad_hoc = tiny.run(root, "relgrade", "compare", "tfidf", "bm25", "--experiment",
                      "experiments/ppi")
    # on stdout, beside the numbers, so a piped or saved copy keeps it; every verdict too
    assert ad_hoc.stdout.startswith("ppi mode: the numbers below are the model key's alone "
                                    "(model-only), not a decision")
    verdicts = [ln for ln in ad_hoc.stdout.splitlines() if " between tfidf and bm25" in ln]
    assert verdicts and all(ln.startswith("model-only, not a decision: ") for ln in verdicts)
    as_json = tiny.run(root, "relgrade", "compare", "tfidf", "bm25", "--experiment",
                       "experiments/ppi", "--json")
    assert as_json.stderr.startswith("ppi mode: the numbers below are the model key's alone")
    json.loads(as_json.stdout)


def test_status_the_report_and_budget_price_the_model_in_calls_and_people_in_hours(ppi_run):
    root, folder, _ = ppi_run
    exp = ("--experiment", "experiments/ppi")
    grades = pd.read_parquet(folder / "data/graded/grades.parquet")
    model = int((grades["grader"] == "model-m").sum())
    people = int((grades["grader"] == "person-h").sum())
    pool_pairs = len(pd.read_parquet(folder / "data/pool/pool.parquet"))
    assert model == pool_pairs and 0 < people < model
    params = yaml.safe_load((folder / "params.yaml").read_text())
    assert params["graders"]["person-h"]["kind"] == "human"  # init: ppi's auditor is a person
    cost = json.loads(tiny.run(root, "relgrade", "status", *exp, "--json").stdout)["cost"]
    assert cost["graders"]["model-m"] == {"worker": "model", "spent": model, "pending": 0,
                                          "calls_per_judgment": 1, "spent_calls": model,
                                          "pending_calls": 0}
    assert cost["graders"]["person-h"]["worker"] == "person"
    # people's judgments at the default 30 s each; the model's are no one's hours
    assert cost["spent_hours"] == pytest.approx(people * 30 / 3600)
    status = tiny.run(root, "relgrade", "status", *exp).stdout
    assert (f"judging cost: {model + people} judgments spent ({people * 30 / 3600:.2f} "
            f"annotator-hours + {model} model calls), 0 pending") in status
    assert f"  model-m (model): {model} spent, 0 pending at 1 call each" in status
    assert f"  person-h (person): {people} spent, 0 pending at 30 s each" in status
    report = (folder / "metrics/report.md").read_text()
    assert f"| model-m | model | {model} | 0 | 1 call | {model} calls | 0 calls |" in report
    assert (f"| person-h | person | {people} | 0 | 30 s | {people * 30 / 3600:.2f} h | "
            "0.00 h |") in report
    budget = tiny.run(root, "relgrade", "budget", *exp).stdout
    assert "human judgments: priced in annotator-hours" in budget
    assert f"The ppi strategy also uses model-m's {pool_pairs} model calls" in budget


def test_a_redraw_after_the_model_graded_is_refused_with_or_without_force(ppi_run):
    root, folder, _ = ppi_run
    lock = (folder / "data/audit/lock.json").read_bytes()
    for extra in ((), ("--force",)):
        done = tiny.run(root, "relgrade", "audit", "redraw", "--experiment", "experiments/ppi",
                        *extra, check=False)
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ")
        assert "the human sample is locked: model-m (the model grader) has" in lines[0]
        assert "set grading.round: 2" in lines[0]
        assert (folder / "data/audit/lock.json").read_bytes() == lock
    # the grade file deleted: its sidecar still records the model's grades, --force or not
    model_grades = folder / "data/grades/model-m/round-1.jsonl"
    kept = model_grades.read_bytes()
    model_grades.unlink()
    try:
        done = tiny.run(root, "relgrade", "audit", "redraw", "--force", "--experiment",
                        "experiments/ppi", check=False)
    finally:
        model_grades.write_bytes(kept)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stdout + done.stderr
    assert re.search(r"the human sample is locked: model-m \(the model grader\) has \d+ "
                     r"grades of round 1 in experiments/ppi/data/grades/model-m/"
                     r"round-1\.bank\.jsonl, ", lines[0]), lines[0]
    assert (folder / "data/audit/lock.json").read_bytes() == lock


def test_a_params_change_that_would_move_the_sample_is_refused_by_the_audit_stage(ppi_run):
    root, folder, _ = ppi_run
    params = folder / "params.yaml"
    text = params.read_text()
    lock = (folder / "data/audit/lock.json").read_bytes()
    audit_table = (folder / "data/audit/audit.jsonl").read_bytes()
    try:
        for old, new in (("human_fraction: 0.5", "human_fraction: 0.25"),
                         ("seed: 0\n", "seed: 1\n")):
            assert old in text
            params.write_text(text.replace(old, new, 1))
            done = tiny.run(root, "dvc", "repro", "-s", "experiments/ppi/dvc.yaml:audit",
                            check=False)
            assert done.returncode != 0
            errors = [x for x in (done.stdout + done.stderr).splitlines()
                      if x.startswith("Error: ")]
            assert len(errors) == 1, done.stdout + done.stderr
            # named from the repository's top, where the dvc repro was typed
            assert errors[0].startswith("Error: experiments/ppi/data/audit/lock.json: ")
            assert "the human sample is locked: model-m (the model grader) has" in errors[0]
            assert "locked with share 0.5; seed 0, stream ppi-sample" in errors[0]
            assert (folder / "data/audit/lock.json").read_bytes() == lock
            assert (folder / "data/audit/audit.jsonl").read_bytes() == audit_table
    finally:
        params.write_text(text)


def test_a_refused_seed_change_stops_at_the_pool_stage_before_its_manifest_is_rewritten(
        ppi_graded, tmp_path):
    # seed is a param of the pool stage too, and DVC runs the pool first: the audit stage's
    # refusal used to come after the pool stage had rewritten its manifest with the new seed
    root = tiny.copy_repo(ppi_graded / "repo", tmp_path / "repo")
    folder = root / EXP
    kept = {name: (folder / name).read_bytes()
            for name in ("data/pool/manifest.json", "data/audit/lock.json")}
    params = folder / "params.yaml"
    assert "seed: 0\n" in params.read_text()
    params.write_text(params.read_text().replace("seed: 0\n", "seed: 1\n", 1))
    done = tiny.run(root, "dvc", "repro", f"{EXP}/dvc.yaml", check=False)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    errors = [x for x in out.splitlines() if x.startswith("Error: ")]
    assert len(errors) == 1, out
    assert errors[0].startswith(f"Error: {EXP}/data/audit/lock.json: the human sample is "
                                "locked: model-m (the model grader) has")
    assert ("locked with share 0.5; seed 0, stream ppi-sample; params now give share 0.5; "
            "seed 1, stream ppi-sample") in errors[0]
    # the pool stage refused, and no stage after it ran
    assert f"Running stage '{EXP}/dvc.yaml:pool'" in out
    assert f"Running stage '{EXP}/dvc.yaml:audit'" not in out
    for name, data in kept.items():
        assert (folder / name).read_bytes() == data, name


@pytest.mark.parametrize("args, said", [
    (("--mode", "ppi", "--human-fraction", "0.2"),
     "--human-fraction: the human sample needs at least 3 queries (the jackknife interval "
     "deletes one and re-tunes lambda on the rest) (found 0.2 of 12 queries = 2)"),
    (("--mode", "ppi", "--human-queries", "13"),
     "--human-queries: the human sample cannot hold more queries than the experiment has "
     "(found 13, of 12 queries)"),
    (("--mode", "ppi", "--human-queries", "2"),
     "--human-queries: the human sample needs at least 3 queries"),
    (("--mode", "ppi", "--human-fraction", "0.5", "--human-queries", "6"),
     "--human-fraction/--human-queries: give --human-fraction or --human-queries, not both"),
    (("--human-fraction", "0.5"), "--human-fraction: --human-fraction goes with --mode ppi "
                                  "(found --mode single)"),
    (("--mode", "triage", "--human-queries", "6"),
     "--human-queries: --human-queries goes with --mode ppi (found --mode triage)"),
])
def test_init_refuses_a_human_sample_it_cannot_draw(tmp_path_factory, args, said):
    root = _repo(tmp_path_factory, "ppi-sample-refused")
    done = tiny.run(root, "relgrade", "init", "experiments/x", "--corpus",
                    "data/input/chunks.jsonl", "--queries", "data/input/queries.tsv",
                    "--intents", "data/input/intents.tsv", "--arm", "bm25=bm25",
                    "--grader-command", MODEL, *args, check=False)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and said in lines[0], lines
    assert not (root / "experiments/x").exists()


def test_before_any_grade_a_params_change_draws_the_sample_again(tmp_path_factory):
    root = _repo(tmp_path_factory, "ppi-before-grades")
    exp = "experiments/early"
    made = _init(root, exp, "--human-queries", "4")
    assert "Human sample: 4 of 12 queries" in made.stdout
    tiny.run(root, "relgrade", "intents", "review", "--experiment", exp, "--reviewer",
             "person-h")
    tiny.run(root, "dvc", "repro", f"{exp}/dvc.yaml:audit")
    lock_path = root / exp / "data/audit/lock.json"
    first = json.loads(lock_path.read_text())
    assert len(first["queries"]) == 4
    assert first["queries"][0]["reason"].endswith("(count 4; seed 0, stream ppi-sample)")
    params = root / exp / "params.yaml"
    params.write_text(params.read_text().replace("human_queries: 4", "human_queries: 5", 1))
    done = tiny.run(root, "dvc", "repro", f"{exp}/dvc.yaml:audit")
    assert "audit: 5 queries for round 1, drawn now" in done.stdout
    second = json.loads(lock_path.read_text())
    assert second["queries"][0]["reason"].endswith("(count 5; seed 0, stream ppi-sample)")
    assert len(second["queries"]) == 5
    # a share that gives fewer queries than the ppi stage needs is refused before the audit
    # stage draws (init's rule: round(0.2 x 12) = 2 < 3), naming the file and the key; the
    # lock stays as it was
    locked = lock_path.read_bytes()
    params.write_text(params.read_text().replace("human_fraction: null", "human_fraction: 0.2", 1)
                      .replace("human_queries: 5", "human_queries: null", 1))
    small = tiny.run(root, "dvc", "repro", f"{exp}/dvc.yaml:audit", check=False)
    assert small.returncode != 0
    errors = [x for x in (small.stdout + small.stderr).splitlines() if x.startswith("Error: ")]
    assert errors == [
        f"Error: {exp}/params.yaml: ppi.human_fraction: the human sample needs at least 3 "
        "queries (the ppi stage's intervals and rank-sets need them) (found 0.2 of 12 pooled "
        "queries = 2). Raise it (the pool has 12 queries) before the audit stage draws the "
        "sample"], small.stdout + small.stderr
    assert lock_path.read_bytes() == locked


def test_a_deleted_lock_does_not_let_the_sample_be_drawn_after_the_model_graded(ppi_run):
    root, folder, _ = ppi_run
    params, lock_path = folder / "params.yaml", folder / "data/audit/lock.json"
    text, lock = params.read_text(), lock_path.read_bytes()
    audit_table = (folder / "data/audit/audit.jsonl").read_bytes()
    model_grades = folder / "data/grades/model-m/round-1.jsonl"
    count = sum(1 for line in model_grades.read_text().splitlines() if line.strip())
    assert count > 0
    try:
        lock_path.unlink()
        params.write_text(text.replace("human_fraction: 0.5", "human_fraction: 0.25", 1))
        done = tiny.run(root, "dvc", "repro", "-s", "experiments/ppi/dvc.yaml:audit",
                        check=False)
        assert done.returncode != 0
        out = done.stdout + done.stderr
        assert "queries for round 1, drawn now" not in out
        errors = [x for x in out.splitlines() if x.startswith("Error: ")]
        assert errors == [
            "Error: experiments/ppi/data/audit/lock.json: the human sample cannot be drawn "
            f"now: model-m (the model grader) has {count} grades of round 1 in "
            "experiments/ppi/data/grades/model-m/round-1.jsonl, and a sample drawn after "
            "the model's grades are seen gives no valid PPI++ estimate (found no lock of "
            "round 1). Restore the round's lock from git (`git checkout -- "
            "experiments/ppi/data/audit/lock.json`; if its deletion was committed, from the "
            "commit before it: `git log -- experiments/ppi/data/audit/lock.json`), or start "
            "a new round honestly: set "
            "grading.round: 2, whose sample is drawn before model-m grades that round "
            "(round 1's grades stay in git)"], out
        assert not lock_path.exists()  # nothing written
        assert (folder / "data/audit/audit.jsonl").read_bytes() == audit_table
        # the grade file deleted too: its bank sidecar still records the model's grades
        sidecar = model_grades.with_name("round-1.bank.jsonl")
        banked = sum(1 for line in sidecar.read_text().splitlines() if line.strip())
        kept = model_grades.read_bytes()
        model_grades.unlink()
        try:
            done = tiny.run(root, "dvc", "repro", "-s", "experiments/ppi/dvc.yaml:audit",
                            check=False)
        finally:
            model_grades.write_bytes(kept)
        errors = [x for x in (done.stdout + done.stderr).splitlines()
                  if x.startswith("Error: ")]
        assert done.returncode != 0 and len(errors) == 1, done.stdout + done.stderr
        assert (f"model-m (the model grader) has {banked} grades of round 1 in "
                "experiments/ppi/data/grades/model-m/round-1.bank.jsonl") in errors[0]
        assert not lock_path.exists()
        # the grade file and its sidecar deleted: the round's meta file says the model
        # started; that deleted too, the grades as committed in git still refuse the draw
        before = tiny.run(root, "git", "rev-parse", "-q", "--verify", "HEAD",
                          check=False).stdout.strip()
        index = (root / ".git/index").read_bytes()
        tiny.run(root, "git", "add", "-f", str(model_grades))
        tiny.run(root, "git", "commit", "-q", "-m", "model-m's grades of round 1")
        meta = model_grades.with_name("round-1.meta.json")
        # the human grader's files of the round would refuse the draw first (any grader's
        # record of the round does): moved aside, so the model's meta file and git history
        # are what is left
        human = sorted((folder / "data/grades/person-h").glob("round-1.*"))
        assert human
        saved = {f: f.read_bytes() for f in (model_grades, sidecar, meta, *human)}
        try:
            model_grades.unlink()
            sidecar.unlink()
            for f in human:
                f.unlink()
            seen = []
            for gone in (None, meta):
                if gone is not None:
                    gone.unlink()
                done = tiny.run(root, "dvc", "repro", "-s", "experiments/ppi/dvc.yaml:audit",
                                check=False)
                errors = [x for x in (done.stdout + done.stderr).splitlines()
                          if x.startswith("Error: ")]
                assert done.returncode != 0 and len(errors) == 1, done.stdout + done.stderr
                seen.append(errors[0])
                assert not lock_path.exists()
        finally:
            for f, data in saved.items():
                f.write_bytes(data)
            # the commit taken back: the repository as the fixture made it
            tiny.run(root, "git", "update-ref", *(("HEAD", before) if before else ("-d", "HEAD")))
            (root / ".git/index").write_bytes(index)
        assert ("model-m (the model grader) started grading round 1 "
                "(experiments/ppi/data/grades/model-m/round-1.meta.json exists)") in seen[0]
        assert re.search(r"model-m \(the model grader\) has grades of round 1 in "
                         r"experiments/ppi/data/grades/model-m/round-1\.jsonl as committed "
                         r"in [0-9a-f]{12} \(deleted since\)", seen[1]), seen[1]
    finally:
        params.write_text(text)
        lock_path.write_bytes(lock)


def test_a_hand_edited_lock_in_ppi_mode_suggests_what_works_there(ppi_run):
    root, folder, _ = ppi_run
    lock_path = folder / "data/audit/lock.json"
    lock = lock_path.read_bytes()
    try:
        edited = json.loads(lock)
        edited["queries"] = edited["queries"][1:]
        lock_path.write_text(json.dumps(edited))
        done = tiny.run(root, "dvc", "repro", "-s", "experiments/ppi/dvc.yaml:audit",
                        check=False)
        errors = [x for x in (done.stdout + done.stderr).splitlines()
                  if x.startswith("Error: ")]
        assert done.returncode != 0 and len(errors) == 1, done.stdout + done.stderr
        assert errors[0].startswith("Error: experiments/ppi/data/audit/lock.json: the audit "
                                    "lock's content does not match its sha256")
        assert ("Restore the lock from git (`git checkout -- "
                "experiments/ppi/data/audit/lock.json`): in ppi mode `relgrade audit redraw "
                "--experiment experiments/ppi` is refused once the model grader has grades of "
                "the round; a new sample is a new round (set grading.round: 2") in errors[0]
    finally:
        lock_path.write_bytes(lock)


def test_a_sample_under_ten_queries_is_warned_by_the_stage_its_record_and_the_report(
        ppi_run, tmp_path, capsys):
    root, folder, _ = ppi_run
    from relgrade.evaluation.ppi_table import small_sample_words
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.stages.ppi import larger_sample_fix, run

    ex = Experiment.load(folder / "params.yaml")
    words = small_sample_words(6, fix=larger_sample_fix(ex))
    assert words.startswith("the human sample holds 6 queries, fewer than the 10 or more "
                            "docs/ppi.md recommends")
    assert words.endswith("Round 1's human sample is locked (raising ppi.human_fraction alone "
                          "is refused), so a larger sample is a new round: set grading.round: "
                          "2 and a larger ppi.human_fraction (now 0.5) in "
                          "experiments/ppi/params.yaml; its sample is drawn before the model "
                          "grades that round, and round 1's grades stay in git")
    record = json.loads((folder / "metrics/ppi.json").read_text())
    assert record["design"]["small_sample"] == {"n": 6, "recommended": 10, "words": words}
    report = (folder / "metrics/report.md").read_text()
    verdicts = report.split("## Verdicts")[1].split("## Judged@k")[0]
    assert f"**Warning: {words}**" in verdicts
    assert f"<strong>Warning: {escape(words)}</strong>" in (
        folder / "metrics/report.html").read_text()
    # the stage prints it, on a copy (its output written again there)
    copy = tiny.copy_repo(root, tmp_path / "repo")
    run(Experiment.load(copy / EXP / "params.yaml"))
    assert f"ppi: warning: {words}\n" in capsys.readouterr().out
