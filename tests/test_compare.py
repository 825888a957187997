"""The comparison of arms: traps, Holm over the family, determinism, segments, renderers."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from relgrade.errors import InputError
from relgrade.evaluation import stats
from relgrade.evaluation.compare import compare_arms
from relgrade.evaluation.noise import LabelNoise
from relgrade.evaluation.settings import Settings, design_pairs
from relgrade.experiment.files import Experiment

A = [0.5, 0.25, 0.75, 0.125, 0.375]
STEP = [0.0625, 0.125, 0.0625, 0.125, 0.0625]
M = "nDCG(dcg='exp-log2')@10"


def table(arms: dict, measure=M, groups=None) -> pd.DataFrame:
    rows = []
    for arm, values in arms.items():
        for i, v in enumerate(values):
            rows.append({"arm": arm, "query_id": f"q{i:03d}",
                         "group": groups[i] if groups else "all", "measure": measure,
                         "value": float(v)})
    return pd.DataFrame(rows)


def settings(**kw) -> Settings:
    base = dict(seed=20261130, n_resamples=2000, n_permutations=2000, baseline="bm25")
    base.update(kw)
    return Settings(**base)


def test_an_arm_against_its_copy_reports_no_difference_without_nan():
    c = compare_arms(table({"bm25": A, "copy": A}), settings=settings())
    (p,) = c.pairs
    assert (p.delta.estimate, p.delta.low, p.delta.high) == (0.0, 0.0, 0.0)
    assert (p.randomization.p, p.p_holm, p.ttest.p) == (1.0, 1.0, 1.0)
    assert p.verdict().startswith(f"no detectable difference on {M} between copy and bm25")
    json.loads(c.to_json())                         # allow_nan=False: no NaN anywhere


def test_a_constant_shift_flags_an_infinite_t_and_gives_the_exact_floor():
    c = compare_arms(table({"bm25": A, "up": np.add(A, 0.0625)}), settings=settings())
    (p,) = c.pairs
    assert p.ttest.infinite and p.ttest.t is None
    assert p.randomization.method == "exact" and p.randomization.p == 0.0625
    d = p.to_dict()
    assert d["t_test"]["infinite"] is True and d["t_test"]["t"] is None
    assert any("infinite" in n for n in d["t_test"]["notes"])
    assert d["low"] == d["high"] == 0.0625                # every query moved the same


def test_an_uneven_step_matches_the_t_test_by_hand():
    c = compare_arms(table({"bm25": A, "up": np.add(A, STEP)}), settings=settings())
    (p,) = c.pairs
    assert p.ttest.t == pytest.approx(5.7155, abs=5e-5)
    assert p.ttest.df == 4 and p.ttest.p == pytest.approx(0.00464, abs=5e-6)
    assert p.delta.estimate == pytest.approx(0.0875)
    assert p.randomization.p == 2 / 32                    # all five differences positive


def test_an_arm_scoring_one_everywhere_gets_a_degenerate_interval_with_a_note():
    c = compare_arms(table({"bm25": np.linspace(0.1, 1.0, 10), "perfect": np.ones(10)}),
                     settings=settings())
    ci = c.intervals[("perfect", M)]
    assert (ci.low, ci.high, ci.se, ci.method) == (1.0, 1.0, 0.0, "degenerate")
    entry = c.to_dict()["arms"]["perfect"][M]
    assert "degenerate" in entry["notes"][0]
    assert entry["power"]["n_needed"] is None


def test_holm_runs_over_every_comparison_made():
    g = np.random.default_rng(1)
    base = g.random(40)
    arms = {"bm25": base, "b": base + g.normal(0.05, 0.1, 40), "c": base + g.normal(0, 0.1, 40)}
    c = compare_arms(table(arms), settings=settings())
    # the verdict's test is the mean test (40 distinct differences: bootstrap-t)
    raw = [p.test.p for p in c.pairs]
    assert [p.test.method for p in c.pairs] == ["bootstrap-t", "bootstrap-t"]
    _, holm, _, _ = multipletests(raw, method="holm")
    assert [p.p_holm for p in c.pairs] == holm.tolist()
    assert [p.significant for p in c.pairs] == [h <= 0.05 for h in holm]
    # metrics.test: sign-flip puts the randomization test's p-values under Holm instead
    c = compare_arms(table(arms), settings=settings(test="sign-flip"))
    _, holm, _, _ = multipletests([p.randomization.p for p in c.pairs], method="holm")
    assert [p.p_holm for p in c.pairs] == holm.tolist()
    assert "symmetric about 0" in " ".join(c.pairs[0].notes)


def test_numbers_do_not_depend_on_the_other_comparisons_or_their_order():
    g = np.random.default_rng(2)
    base = g.random(60)
    arms = {"bm25": base, "b": base + g.normal(0.02, 0.1, 60), "c": base + g.normal(0, 0.1, 60)}
    both = compare_arms(table(arms), settings=settings(pairs="all"),
                        pairs=[("c", "bm25"), ("b", "bm25")])
    alone = compare_arms(table(arms), settings=settings(), pairs=[("b", "bm25")])
    x = both.pair("b", "bm25", M)
    y = alone.pair("b", "bm25", M)
    assert x.delta == y.delta and x.randomization == y.randomization
    assert both.intervals[("b", M)] == alone.intervals[("b", M)]


def test_bit_identical_across_runs_and_worker_counts():
    g = np.random.default_rng(3)
    base = g.random(300)
    arms = {"bm25": base, "b": base + g.normal(0.01, 0.1, 300), "c": base + g.normal(0, 0.1, 300)}
    groups = ["head" if i % 3 else "tail" for i in range(300)]
    df = table(arms, groups=groups)
    one = compare_arms(df, settings=settings(pairs="all"), workers=1).to_json()
    again = compare_arms(df, settings=settings(pairs="all"), workers=1).to_json()
    two = compare_arms(df, settings=settings(pairs="all"), workers=2).to_json()
    assert one == again == two
    shuffled = df.sample(frac=1.0, random_state=0)       # row order of the input is irrelevant
    assert compare_arms(shuffled, settings=settings(pairs="all"), workers=1).to_json() == one


def test_a_different_seed_changes_the_resamples():
    g = np.random.default_rng(4)
    base = g.random(50)
    arms = {"bm25": base, "b": base + g.normal(0.02, 0.1, 50)}
    a = compare_arms(table(arms), settings=settings()).pairs[0].delta
    b = compare_arms(table(arms), settings=settings(seed=1)).pairs[0].delta
    assert a.estimate == b.estimate and (a.low, a.high) != (b.low, b.high)


def test_segment_cancellation_is_flagged_when_groups_disagree_in_sign():
    n = 60
    g = np.random.default_rng(5)
    base = g.random(n) * 0.5
    groups = ["keyword"] * 30 + ["question"] * 30
    shift = np.r_[np.full(30, 0.3), np.full(30, -0.3)] + g.normal(0, 0.02, n)
    c = compare_arms(table({"bm25": base, "hybrid": base + shift}, groups=groups),
                     settings=settings())
    (p,) = c.pairs
    segs = {s.group: s for s in p.segments}
    assert segs["keyword"].delta.low > 0 and segs["question"].delta.high < 0
    assert segs["keyword"].delta.n == 30
    assert p.cancellation
    assert "segment cancellation" in p.verdict()
    assert p.to_dict()["segment_cancellation"] is True


def test_no_cancellation_when_groups_agree():
    n = 40
    base = np.linspace(0, 0.5, n)
    groups = ["keyword", "question"] * 20
    c = compare_arms(table({"bm25": base, "hybrid": base + 0.1 + 0.01 * np.sin(np.arange(n))},
                           groups=groups), settings=settings())
    assert not c.pairs[0].cancellation


def test_verdict_of_a_clear_win_reads_as_the_protocol_sentence():
    g = np.random.default_rng(6)
    base = g.random(200) * 0.6
    c = compare_arms(table({"bm25": base, "hybrid": base + g.normal(0.03, 0.05, 200)}),
                     settings=settings())
    (p,) = c.pairs
    assert p.significant
    pattern = (r"hybrid better than bm25 on nDCG\(dcg='exp-log2'\)@10 by 0\.\d{3} "
               r"\[0\.\d{3}, 0\.\d{3}\], p=[0-9.e-]+ after Holm$")
    assert re.match(pattern, p.verdict()), p.verdict()
    # the loser named first reads the same comparison the other way round
    mirrored = c.pair("bm25", "hybrid", M)
    assert mirrored.delta.estimate == -p.delta.estimate
    assert (mirrored.delta.low, mirrored.delta.high) == (-p.delta.high, -p.delta.low)
    assert mirrored.verdict().startswith("hybrid better than bm25")


def test_a_win_inside_the_label_noise_band_is_not_a_measured_improvement():
    g = np.random.default_rng(7)
    base = g.random(100)
    c = compare_arms(table({"bm25": base, "hybrid": base + 0.02 + g.normal(0, 0.01, 100)}),
                     settings=settings())
    p = replace(c.pairs[0], noise=LabelNoise(10, 0.02, -0.03, 0.05, 0.015, True))
    assert p.significant
    assert p.verdict().endswith("not measured an improvement")
    assert p.to_dict()["label_noise"]["within_band"] is True


def test_small_sets_get_the_t_interval_and_the_t_test_of_scipy():
    # 12 queries, 6 of them tied at 0: below 30 off the mode, so Student t on the
    # differences, as scipy.stats.ttest_rel and scipy.stats.t.interval compute them.
    base = np.linspace(0.2, 0.8, 12)
    step = np.array([0, 0, 0, 0, 0, 0, 0.1, -0.05, 0.2, 0.15, 0.05, 0.1])
    c = compare_arms(table({"bm25": base, "b": base + step}), settings=settings())
    (p,) = c.pairs
    d = (base + step) - base
    low, high = stats.sps.t.interval(0.95, 11, d.mean(), stats.sps.sem(d))
    assert (p.delta.method, p.test.method) == ("t", "t")
    assert (p.delta.low, p.delta.high) == pytest.approx((low, high), rel=1e-12)
    assert p.test.p == pytest.approx(stats.sps.ttest_rel(base + step, base).pvalue, rel=1e-9)
    assert p.to_dict()["p_test"] == p.test.p
    # 6 non-zero differences < power_min_nonzero 10: no power figure, the set cannot tell
    assert p.power.n_needed is None and p.power.power_now is None
    assert "the set cannot yet tell how many queries a 2% change needs: the spread rests " \
           "on 6 non-zero differences of 12 queries" in p.verdict()


def test_power_min_nonzero_is_the_threshold_of_the_power_sentence():
    base = np.linspace(0.2, 0.8, 12)
    step = np.array([0, 0, 0, 0, 0, 0, 0.1, -0.05, 0.2, 0.15, 0.05, 0.1])
    c = compare_arms(table({"bm25": base, "b": base + step}),
                     settings=settings(power_min_nonzero=6))
    assert c.pairs[0].power.n_needed is not None


def test_a_weak_difference_reports_the_queries_needed():
    g = np.random.default_rng(8)
    base = g.random(30)
    c = compare_arms(table({"bm25": base, "b": base + g.normal(0, 0.1, 30)}), settings=settings())
    (p,) = c.pairs
    se, mean_b = p.delta.se, float(np.mean(base))
    z = stats.special.ndtri(0.975) + stats.special.ndtri(0.8)
    assert p.power.n_needed == int(np.ceil(30 * (z * se / (0.02 * mean_b)) ** 2 - 1e-9))
    assert f"about {p.power.n_needed} queries would detect a 2% change" in p.verdict()


def test_traffic_weights_make_weighted_means():
    c = compare_arms(table({"bm25": [1.0, 0.0], "b": [0.0, 0.0]}), settings=settings(),
                     weights={"q000": 3.0, "q001": 1.0})
    assert c.intervals[("bm25", M)].estimate == pytest.approx(0.75)
    assert c.pairs[0].delta.estimate == pytest.approx(-0.75)


def test_judged_measures_are_reported_but_not_compared():
    df = pd.concat([table({"bm25": A, "b": STEP}), table({"bm25": A, "b": A}, measure="Judged@10")])
    c = compare_arms(df, settings=settings())
    assert c.measures == [M]


def test_missing_values_and_bad_settings_are_input_errors():
    df = table({"bm25": A, "b": A}).iloc[:-1]
    with pytest.raises(InputError, match=r"arm b, query q004, measure nDCG"):
        compare_arms(df, settings=settings())
    with pytest.raises(InputError, match="baseline is not one of the arms"):
        compare_arms(table({"x": A, "y": A}), settings=settings())
    with pytest.raises(InputError, match="metrics.level"):
        settings(level=95)
    bad = table({"bm25": A, "b": A})
    bad.loc[0, "value"] = np.nan
    with pytest.raises(InputError, match="finite"):
        compare_arms(bad, settings=settings())


def test_settings_come_from_the_params_file():
    import yaml

    from relgrade.experiment.params import load_params

    params = yaml.safe_load(open("params.yaml"))
    s = load_params("params.yaml").compare_settings()
    m = params["metrics"]
    assert (s.seed, s.n_resamples, s.level, s.baseline) == (
        params["seed"], m["bootstrap"], m["level"], m["baseline"])
    assert (s.alpha, s.power, s.min_relative_change) == (m["alpha"], m["power"],
                                                         m["min_relative_change"])


def test_renderers_show_the_same_numbers():
    g = np.random.default_rng(9)
    base = g.random(50)
    c = compare_arms(table({"bm25": base, "hybrid": base + 0.05}, groups=["k", "q"] * 25),
                     settings=settings())
    d = json.loads(c.to_json())
    p = d["comparisons"][0]
    assert p["delta"] == pytest.approx(0.05)
    assert d["verdicts"] == c.verdicts()
    md = c.to_markdown()
    assert "| hybrid | bm25 | nDCG(dcg='exp-log2')@10 | +0.0500 |" in md
    assert "## Segments" in md and c.verdicts()[0] in md
    from rich.console import Console

    console = Console(record=True, width=200)
    for t in c.rich_tables(measure=M, pair=("hybrid", "bm25")):
        console.print(t)
    text = console.export_text()
    assert "hybrid − bm25" in text and "+0.0500" in text


def test_plot_tables():
    c = compare_arms(table({"bm25": [0.5, 0.5, 0.5], "b": [0.75, 0.25, 0.5]}), settings=settings())
    arms = c.arms_plot()
    assert arms.columns.tolist() == ["arm", "measure", "mean", "low", "high"]
    assert arms.set_index("arm").loc["bm25", "mean"] == 0.5
    deltas = c.deltas_plot()
    assert deltas["delta"].tolist() == [0.25, 0.0, -0.25]      # largest first
    assert deltas["rank"].tolist() == [1, 2, 3]
    assert deltas["query_id"].tolist() == ["q000", "q002", "q001"]
    assert set(deltas["arm"]) == {"b"} and set(deltas["baseline"]) == {"bm25"}


def test_design_pairs():
    assert design_pairs(["c", "a", "b"], baseline="b", mode="baseline") == [
        ("a", "b"), ("c", "b")]
    assert design_pairs(["c", "a", "b"], baseline=None, mode="all") == [
        ("a", "b"), ("a", "c"), ("b", "c")]


def test_an_ample_query_set_says_a_real_difference_is_likely_smaller():
    g = np.random.default_rng(10)
    base = g.random(3000) * 0.5 + 0.25
    c = compare_arms(table({"bm25": base, "b": base + g.normal(0, 0.02, 3000)}),
                     settings=settings())
    (p,) = c.pairs
    assert not p.significant and p.power.n_needed < 3000
    assert "3000 queries detect a 2% change with power 80% or more" in p.verdict()


def test_an_interval_clear_of_zero_before_holm_is_said_to_be_so():
    g = np.random.default_rng(13)          # a seed where b's raw interval clears 0
    base = g.random(25)
    arms = {"bm25": base, "b": base + 0.04 + g.normal(0, 0.09, 25)}
    for k in range(6):
        arms[f"x{k}"] = base + g.normal(0, 0.1, 25)
    c = compare_arms(table(arms), settings=settings())
    p = c.pair("b", "bm25", M)
    assert p.delta.excludes_zero() and not p.significant, (p.delta, p.p_holm)
    assert "excludes 0 only before correcting for the 7 comparisons made" in p.verdict()


# --- the stage and the command line --------------------------------------------------

def _experiment(root, *, tail_sample=0):
    """A complete small experiment on disk: 24 queries, arms bm25 and hybrid; with
    ``tail_sample``, that many chunks per query drawn from ranks 6..8 beside the depth-5
    pool, the inferred measures scored and the pool table written."""
    import yaml

    from relgrade.evaluation import measures, metrics
    from relgrade.io import files as io
    from relgrade.io.trec import write_trec_run
    from relgrade.protocol import key as keymod
    from relgrade.protocol import pool as poolmod

    params = yaml.safe_load(open("params.yaml"))
    qids = [f"q{i:02d}" for i in range(1, 25)]
    groups = {q: ("keyword" if i % 2 else "question") for i, q in enumerate(qids)}
    truth = lambda c: {"0": 2, "1": 1}.get(c.rsplit("-", 1)[1], 0)  # noqa: E731
    g = np.random.default_rng(12)
    runs = {}
    for arm, quality in (("bm25", 0.8), ("hybrid", 2.0)):
        rows = []
        for q in qids:
            chunks = [f"{q}-{i}" for i in range(8)]
            scores = [quality * truth(c) + g.normal() for c in chunks]
            rows += [{"query_id": q, "chunk_id": c, "rank": 0, "score": round(s, 4)}
                     for c, s in zip(chunks, scores)]
        run = pd.DataFrame(rows)
        runs[arm] = run
        write_trec_run(root / "data/runs" / f"{arm}.trec", run, tag=arm)
    from relgrade.ranking import canonical_ranking

    stacked = canonical_ranking(pd.concat([r.assign(arm=a) for a, r in runs.items()],
                                          ignore_index=True))
    pool, prov, _ = poolmod.build_pool(stacked, depth=5, tail_sample=tail_sample,
                                       tail_depth=8 if tail_sample else None,
                                       rng=np.random.default_rng(5) if tail_sample else None)
    key = pool[["query_id", "chunk_id"]].assign(grade=[truth(c) for c in pool["chunk_id"]])
    (root / "data/key").mkdir(parents=True)
    (root / "data/key/key.jsonl").write_bytes(keymod.key_bytes(key))
    io.write_json(root / "data/key/record.json",
                  {"key_sha256": keymod.key_sha256(key), "pool_version": "p-test",
                   "post_hoc": False})
    io.write_parquet(root / "data/private/provenance.parquet", prov)
    audit = qids[:4]
    io.write_jsonl(root / "data/audit/audit.jsonl", [{"query_id": q} for q in audit])
    aud = key[key["query_id"].isin(audit)].copy()
    aud.loc[aud.index[0], "grade"] = 1 if aud["grade"].iloc[0] != 1 else 2
    grades = pd.concat([key.assign(grader="grader-a", role="grader"),
                        aud.assign(grader="auditor-b", role="auditor")], ignore_index=True)
    io.write_parquet(root / "data/graded/grades.parquet",
                     grades.assign(round=1, reason=""))
    ms = measures.protocol_measures([3, 5, 10])
    inclusion = None
    if tail_sample:
        ms += ["xinfAP@10", "infNDCG(dcg='exp-log2')@10"]
        inclusion = pool[["query_id", "chunk_id", "inclusion_prob"]]
        io.write_parquet(root / "data/pool/pool.parquet", pool)
    for arm, run in runs.items():
        pq = metrics.per_query(qrels=key, run=run, measures=ms, inclusion=inclusion)
        pq["group"] = pq["query_id"].map(groups)
        io.write_parquet(root / "data/metrics" / f"{arm}.parquet",
                         pq[["query_id", "group", "measure", "value"]])
    params["arms"] = {"bm25": {"kind": "file", "depth": 8, "source": "x"},
                      "hybrid": {"kind": "file", "depth": 8, "source": "x"}}
    params["pool"].update(depth=5, tail_sample=tail_sample, tail_depth=8)
    params["metrics"].update(bootstrap=1000, permutations=1000, baseline="bm25")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return params


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    root = tmp_path_factory.mktemp("exp")
    params = _experiment(root)
    return root, params


def _stage_main():
    import importlib

    return importlib.import_module("relgrade.pipeline.stages.compare").run


def test_the_stage_writes_the_report_and_both_plot_tables(experiment, monkeypatch, capsys):
    root, params = experiment
    monkeypatch.chdir(root)
    _stage_main()(Experiment.from_mapping(params))
    report = json.loads((root / "metrics/comparisons.json").read_text())
    record = json.loads((root / "data/key/record.json").read_text())
    assert report["key_sha256"] == record["key_sha256"]
    assert report["pool_version"] == "p-test" and report["post_hoc"] is False
    assert {(c["arm_a"], c["arm_b"]) for c in report["comparisons"]} == {("hybrid", "bm25")}
    ndcg = next(c for c in report["comparisons"] if c["measure"] == "nDCG(dcg='exp-log2')@10")
    assert ndcg["significant"] and ndcg["verdict"].startswith("hybrid better than bm25")
    assert ndcg["label_noise"]["queries"] == 4
    assert {r["arm"] for r in report["pool_bias"]["leave_one_arm_out"]} == {"bm25", "hybrid"}
    assert report["label_noise"]["changed"] == 1
    arms = pd.read_csv(root / "metrics/plots/arms.csv")
    assert arms.columns.tolist() == ["arm", "measure", "mean", "low", "high"]
    deltas = pd.read_csv(root / "metrics/plots/deltas.csv")
    assert set(deltas["measure"]) == {"nDCG(dcg='exp-log2')@10"} and len(deltas) == 24
    assert ndcg["verdict"] in capsys.readouterr().out


def test_the_command_line_prints_the_stage_numbers(experiment, monkeypatch):
    from click.testing import CliRunner

    from relgrade.cli import main

    root, params = experiment
    monkeypatch.chdir(root)
    _stage_main()(Experiment.from_mapping(params))
    stage = json.loads((root / "metrics/comparisons.json").read_text())
    runner = CliRunner()
    res = runner.invoke(main, ["compare", "hybrid", "bm25", "--json", "-m", M])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.output)
    (one,) = cli["comparisons"]
    ref = next(c for c in stage["comparisons"] if c["measure"] == M)
    for k in ("delta", "low", "high", "p_randomization", "p_holm", "verdict"):
        assert one[k] == ref[k]
    # read the other way round: mirrored numbers, same p-values
    res = runner.invoke(main, ["compare", "bm25", "hybrid", "-m", M])
    assert res.exit_code == 0, res.output
    assert res.output.rstrip().splitlines()[-1] == ref["verdict"]
    assert "Paired comparisons: bm25 − hybrid" in res.output
    md = runner.invoke(main, ["compare", "hybrid", "bm25", "--markdown"]).output
    assert md.startswith("# relgrade comparison") and ref["verdict"] in md


def test_the_command_line_names_an_unknown_arm(experiment, monkeypatch):
    from click.testing import CliRunner

    from relgrade.cli import main

    root, _ = experiment
    monkeypatch.chdir(root)
    res = CliRunner().invoke(main, ["compare", "hybrid", "nope"])
    assert res.exit_code == 1
    assert "Error: nope: unknown arm. Arms: bm25, hybrid" in res.output


def test_a_measure_typed_in_lower_case_suggests_the_compared_one(experiment, monkeypatch):
    from click.testing import CliRunner

    from relgrade.cli import main

    root, _ = experiment
    monkeypatch.chdir(root)
    res = CliRunner().invoke(main, ["compare", "hybrid", "bm25", "-m", "ndcg@10"])
    assert res.exit_code == 1
    assert res.output.startswith("Error: ndcg@10: measure not compared. Did you mean "
                                 "nDCG(dcg='exp-log2')@10? Use one of nDCG(dcg='exp-log2')@3, ")
    res = CliRunner().invoke(main, ["compare", "hybrid", "bm25", "-m", "r@5"])
    assert res.output.startswith("Error: r@5: measure not compared. Did you mean R@5? ")


def test_a_key_changed_after_freezing_is_refused(tmp_path, monkeypatch):
    from relgrade.errors import ProtocolError

    params = _experiment(tmp_path)
    monkeypatch.chdir(tmp_path)
    with open(tmp_path / "data/key/key.jsonl", "ab") as f:
        f.write(b'{"query_id":"q99","chunk_id":"x","grade":2}\n')
    with pytest.raises(ProtocolError, match="is not the .* of its record .*: the key stage was interrupted between its writes, or a file was edited"):
        _stage_main()(Experiment.from_mapping(params))
    assert not (tmp_path / "metrics/comparisons.json").exists()


def test_a_tail_sample_compares_the_inferred_measures_with_the_same_paired_tests(
        tmp_path, monkeypatch):
    # two of ranks 6..8 drawn per query (inclusion probability 2/3 where no arm pooled them)
    params = _experiment(tmp_path, tail_sample=2)
    monkeypatch.chdir(tmp_path)
    pool = pd.read_parquet(tmp_path / "data/pool/pool.parquet")
    assert (pool["inclusion_prob"] < 1).any()
    _stage_main()(Experiment.from_mapping(params))
    from relgrade.evaluation.compare import INFERRED_NOTE, INFERRED_POOL_BIAS_NOTE

    report = json.loads((tmp_path / "metrics/comparisons.json").read_text())
    inferred = ["xinfAP@10", "infNDCG(dcg='exp-log2')@10"]
    assert [m for m in report["measures"] if m in inferred] == inferred
    values = {arm: pd.read_parquet(tmp_path / "data/metrics" / f"{arm}.parquet")
              for arm in ("bm25", "hybrid")}
    for m in inferred:
        (c,) = [c for c in report["comparisons"] if c["measure"] == m]
        mean = {arm: v.loc[v["measure"] == m, "value"].mean() for arm, v in values.items()}
        assert c["mean_a"] == pytest.approx(mean["hybrid"])
        assert c["delta"] == pytest.approx(mean["hybrid"] - mean["bm25"])
        assert c["holm_family"] == len(report["comparisons"])  # in Holm's family with the rest
        assert INFERRED_NOTE in c["notes"]
        # the label-noise band scores the grader's key on the four audit queries
        audit = [f"q{i:02d}" for i in range(1, 5)]
        d = {arm: v[(v["measure"] == m) & v["query_id"].isin(audit)]["value"].mean()
             for arm, v in values.items()}
        assert c["label_noise"]["queries"] == 4
        assert c["label_noise"]["delta_grader"] == pytest.approx(d["hybrid"] - d["bm25"])
    plain = next(c for c in report["comparisons"] if c["measure"] == M)
    assert INFERRED_NOTE not in plain["notes"]
    assert report["pool_bias"]["not_checked"] == {"measures": inferred,
                                                  "note": INFERRED_POOL_BIAS_NOTE}
    assert not {r["measure"] for r in report["pool_bias"]["leave_one_arm_out"]} & set(inferred)


def test_full_report_announces_its_three_steps_and_a_stage_prints_one_line_each():
    import io

    from rich.console import Console

    from relgrade.evaluation.compare import full_report
    from relgrade.experiment.progress import step_printer

    seen = []
    plain = full_report(table({"bm25": A, "up": [a + s for a, s in zip(A, STEP)]}),
                        settings=settings(n_resamples=200, n_permutations=200),
                        progress=seen.append)
    assert seen == ["paired comparisons (bootstrap intervals, sign-flip tests)",
                    "pool bias (each arm's pairs left out in turn)",
                    "label noise (the auditor's key on the audit queries)"]
    assert plain.to_json() == full_report(
        table({"bm25": A, "up": [a + s for a, s in zip(A, STEP)]}),
        settings=settings(n_resamples=200, n_permutations=200)).to_json()
    # in a log (not a terminal): one plain line per step
    out = io.StringIO()
    ticks = iter([10.0, 10.0, 11.25, 13.5])
    step = step_printer("compare", 3, console=Console(file=out, width=40),
                        clock=lambda: next(ticks))
    for what in seen:
        step(what)
    assert out.getvalue().splitlines() == [
        "compare: step 1/3: paired comparisons (bootstrap intervals, sign-flip tests) (0.0 s "
        "so far)",
        "compare: step 2/3: pool bias (each arm's pairs left out in turn) (1.2 s so far)",
        "compare: step 3/3: label noise (the auditor's key on the audit queries) (3.5 s so far)"]


def test_intervals_past_the_measures_range_are_clipped_and_marked():
    # nine queries at 1.0 and one at 0.4: mean 0.94, sd 0.18974, se 0.06; Student t (9 df,
    # 2.2622) reaches 0.94 + 0.13573 = 1.0757 > 1, cut to 1. The difference from an arm at 0
    # everywhere is the same column: [0.8043, 1.0757] cut to [0.8043, 1].
    top = [1.0] * 9 + [0.4]
    c = compare_arms(table({"bm25": [0.0] * 10, "top": top}), settings=settings())
    arm = c.to_dict()["arms"]["top"][M]
    assert arm["high"] == 1.0 and arm["clipped"] is True
    assert arm["low"] == pytest.approx(0.94 - 2.2621571627 * 0.0600000, abs=1e-6)
    assert any(n.startswith("clipped to [0, 1]") for n in arm["notes"])
    (p,) = c.pairs
    assert (p.delta.high, p.delta.clipped) == (1.0, True)
    assert p.delta.low == pytest.approx(arm["low"], abs=1e-12)
    assert any(n.startswith("clipped to [-1, 1]") for n in p.delta.notes)
    # an interval inside the range is left as it is, and says so
    assert c.to_dict()["arms"]["bm25"][M]["clipped"] is False
    assert c.to_dict()["comparisons"][0]["clipped"] is True
