"""`relgrade compare --qrels` and `--per-query`: the experiment's statistics on plain files."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats as sps

from relgrade.cli import main
from relgrade.evaluation.compare import compare_arms
from relgrade.evaluation.settings import Settings

# Four queries with one relevant chunk each; q5 has nothing relevant and is left out of RR.
QRELS = "q1 0 d1 1\nq2 0 d2 1\nq3 0 d3 1\nq4 0 d4 1\nq5 0 d5 0\n"
# a: RR 1, 1, 1/2, 1; b: RR 1/2, 1/2, 0, 1, and a query (q9) the qrels do not have.
RUN_A = ("q1 Q0 d1 1 9 a\nq2 Q0 d2 1 9 a\nq3 Q0 x3 1 9 a\nq3 Q0 d3 2 8 a\nq4 Q0 d4 1 9 a\n"
         "q5 Q0 d5 1 9 a\n")
RUN_B = ("q1 Q0 x1 1 9 b\nq1 Q0 d1 2 8 b\nq2 Q0 x2 1 9 b\nq2 Q0 d2 2 8 b\nq3 Q0 x3 1 9 b\n"
         "q4 Q0 d4 1 9 b\nq9 Q0 d9 1 9 b\n")
RR_A = np.array([1.0, 1.0, 0.5, 1.0])
RR_B = np.array([0.5, 0.5, 0.0, 1.0])


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "a.run").write_text(RUN_A)
    (tmp_path / "b.run").write_text(RUN_B)
    return tmp_path


def _invoke(*args):
    result = CliRunner().invoke(main, ["compare", *map(str, args)])
    return result


def _json(*args):
    result = _invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_compare_qrels_gives_means_tests_and_effect_size_computed_by_hand(files):
    doc = _json("--qrels", files / "qrels.txt", files / "a.run", files / "b.run", "-m", "RR@10",
                "--bootstrap", 2000, "--permutations", 2000)
    assert doc["arms"]["a"]["RR@10"]["estimate"] == pytest.approx(3.5 / 4)
    assert doc["arms"]["b"]["RR@10"]["estimate"] == pytest.approx(2.0 / 4)
    (c,) = doc["comparisons"]
    # every run against the baseline, the first run: b against a
    assert (c["arm_a"], c["arm_b"], c["measure"], c["n"]) == ("b", "a", "RR@10", 4)
    assert c["delta"] == pytest.approx(-0.375)
    # three non-zero differences of -1/2: exact test, 2 of the 2^3 sign patterns reach |-3/2|
    assert c["randomization"]["method"] == "exact"
    assert c["p_randomization"] == pytest.approx(2 / 8)
    # d = (-1/2, -1/2, -1/2, 0): mean -3/8, sd (ddof 1) 1/4, se 1/8, t = -3 on 3 df; one
    # value off the mode, so the verdict's mean test is Student's t: p = 2 * sf_t3(3)
    assert c["test"]["method"] == "t" and c["test"]["statistic"] == pytest.approx(-3.0)
    assert c["p_test"] == pytest.approx(2 * sps.t.sf(3.0, 3))
    assert c["p_holm"] == pytest.approx(c["p_test"]) and c["holm_family"] == 1
    # and the interval is t's: -3/8 -+ t_{3, 0.975} / 8
    assert (c["low"], c["high"]) == pytest.approx((-0.375 - sps.t.ppf(0.975, 3) / 8,
                                                   -0.375 + sps.t.ppf(0.975, 3) / 8))
    assert c["d_z"] == pytest.approx(-1.5)
    ref = sps.ttest_rel(RR_B, RR_A)
    assert c["t_test"]["t"] == pytest.approx(ref.statistic)
    assert c["t_test"]["p"] == pytest.approx(ref.pvalue)
    assert doc["settings"]["seed"] == 0 and doc["settings"]["baseline"] == "a"


def test_compare_qrels_on_an_empty_run_gives_a_fix_for_the_command_not_for_arms(files):
    (files / "c.run").write_text("")
    result = _invoke("--qrels", files / "qrels.txt", files / "a.run", files / "c.run")
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: {files / 'c.run'}: the run is empty. Give the run at least one ranked "
        "chunk, or leave the file out of `relgrade compare --qrels`")


def test_compare_qrels_records_the_inputs_it_rests_on(files):
    doc = _json("--qrels", files / "qrels.txt", files / "a.run", files / "b.run", "-m", "RR@10",
                "--bootstrap", 100, "--permutations", 100)
    sha = hashlib.sha256((files / "qrels.txt").read_bytes()).hexdigest()
    assert doc["qrels_sha256"] == sha
    assert doc["runs"]["b"]["sha256"] == hashlib.sha256(RUN_B.encode()).hexdigest()


def test_compare_qrels_notes_unanswered_foreign_and_excluded_queries(files):
    result = _invoke("--qrels", files / "qrels.txt", files / "a.run", files / "b.run",
                     "-m", "RR@10", "--bootstrap", 100, "--permutations", 100)
    assert result.exit_code == 0, result.output
    assert "Note: run b answers 4 of 5 queries of the qrels; the other 1 score 0." in result.output
    assert "Note: run b has 1 queries that are not in the qrels, left out: q9." in result.output
    assert "Note: 1 of 5 queries excluded from RR@10: nothing relevant in the qrels." \
        in result.output
    assert "no detectable difference on RR@10 between b and a" in result.output


def test_compare_qrels_equals_compare_arms_on_the_same_per_query_values(files):
    doc = _json("--qrels", files / "qrels.txt", files / "a.run", files / "b.run", "-m", "RR@10",
                "--seed", 7, "--bootstrap", 500, "--permutations", 500)
    pq = pd.DataFrame({"arm": ["a"] * 4 + ["b"] * 4, "query_id": ["q1", "q2", "q3", "q4"] * 2,
                       "measure": "RR@10", "value": np.concatenate([RR_A, RR_B])})
    ref = compare_arms(pq, settings=Settings(seed=7, n_resamples=500, n_permutations=500,
                                             baseline="a"), pairs=[("b", "a")])
    want = json.loads(ref.to_json())
    assert doc["comparisons"] == want["comparisons"]
    assert doc["arms"] == want["arms"]


def test_compare_per_query_file_gives_the_same_numbers_as_qrels(files):
    table = pd.DataFrame({"run": ["a"] * 4 + ["b"] * 4, "query_id": ["q1", "q2", "q3", "q4"] * 2,
                          "measure": "RR@10", "value": np.concatenate([RR_A, RR_B])})
    table.to_csv(files / "pq.tsv", sep="\t", index=False)
    from_qrels = _json("--qrels", files / "qrels.txt", files / "a.run", files / "b.run",
                       "-m", "RR@10", "--bootstrap", 300, "--permutations", 300)
    from_table = _json("--per-query", files / "pq.tsv", "--bootstrap", 300,
                       "--permutations", 300)
    assert from_table["comparisons"] == from_qrels["comparisons"]
    assert from_table["arms"] == from_qrels["arms"]


def test_compare_per_query_files_without_a_run_column_are_runs_named_by_file(files):
    for name, values in (("a", RR_A), ("b", RR_B)):
        pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4"], "measure": "RR@10",
                      "value": values}).to_parquet(files / f"{name}.parquet")
    doc = _json("--per-query", files / "a.parquet", "--per-query", files / "b.parquet",
                "--bootstrap", 200, "--permutations", 200)
    assert doc["comparisons"][0]["delta"] == pytest.approx(-0.375)


def test_compare_all_pairs_with_groups_gives_segments_and_holm_over_every_pair(files):
    rows = []
    for run, shift in (("r1", 0.0), ("r2", 0.1), ("r3", 0.3)):
        for i in range(8):
            rows.append({"run": run, "query_id": f"q{i}", "measure": "P@5",
                         "value": 0.1 * (i % 4) + shift * (1 if i < 4 else -1) + 0.5})
    pd.DataFrame(rows).to_csv(files / "pq.tsv", sep="\t", index=False)
    pd.DataFrame({"query_id": [f"q{i}" for i in range(8)],
                  "group": ["head"] * 4 + ["tail"] * 4}).to_csv(files / "g.tsv", sep="\t",
                                                               index=False)
    doc = _json("--per-query", files / "pq.tsv", "--all-pairs", "--groups", files / "g.tsv",
                "--bootstrap", 200, "--permutations", 200)
    assert [(c["arm_a"], c["arm_b"]) for c in doc["comparisons"]] == [
        ("r1", "r2"), ("r1", "r3"), ("r2", "r3")]
    assert all(c["holm_family"] == 3 for c in doc["comparisons"])
    r1r3 = doc["comparisons"][1]
    # r1 - r3 is -0.3 on every head query and +0.3 on every tail query
    seg = {s["group"]: s for s in r1r3["segments"]}
    assert seg["head"]["delta"] == pytest.approx(-0.3)
    assert seg["tail"]["delta"] == pytest.approx(0.3)
    assert r1r3["segment_cancellation"] is True
    ps = [c["p_test"] for c in doc["comparisons"]]
    holm = sorted(ps)
    adjusted = [min(1.0, max((3 - j) * holm[j] for j in range(i + 1))) for i in range(3)]
    assert sorted(c["p_holm"] for c in doc["comparisons"]) == pytest.approx(adjusted)


def test_compare_latex_is_a_booktabs_table_with_superscripts_for_significant_wins(files):
    n = 30
    rows = [{"run": run, "query_id": f"q{i:02d}", "measure": "nDCG@10", "value": v}
            for i in range(n)
            for run, v in (("base_line", 0.2 + 0.01 * (i % 5)), ("better", 0.6 + 0.01 * (i % 3)))]
    pd.DataFrame(rows).to_csv(files / "pq.tsv", sep="\t", index=False)
    result = _invoke("--per-query", files / "pq.tsv", "--latex", "--bootstrap", 200,
                     "--permutations", 999)
    assert result.exit_code == 0, result.output
    mean_base = np.mean([0.2 + 0.01 * (i % 5) for i in range(n)])
    mean_better = np.mean([0.6 + 0.01 * (i % 3) for i in range(n)])
    assert result.output == (
        "\\begin{table}[t]\n\\centering\n"
        "\\caption{Mean over the queries. A superscript marks a significant improvement over "
        "the run with that letter: paired test of mean difference 0 (Student t below 30 "
        "queries off the most common difference, studentized bootstrap of 999 resamples from "
        "there), Holm-adjusted over 1 comparisons, alpha 0.05. Best in bold.}\n"
        "\\begin{tabular}{clr}\n\\toprule\n\\# & Run & nDCG@10 \\\\\n\\midrule\n"
        f"a & base\\_line & {mean_base:.4f} \\\\\n"
        f"b & better & \\textbf{{{mean_better:.4f}}}$^{{a}}$ \\\\\n"
        "\\bottomrule\n\\end{tabular}\n\\end{table}\n")


def test_compare_markdown_names_the_seed_and_the_inputs(files):
    result = _invoke("--qrels", files / "qrels.txt", files / "a.run", files / "b.run",
                     "-m", "RR@10", "--markdown", "--seed", 11, "--bootstrap", 100,
                     "--permutations", 100)
    assert result.exit_code == 0, result.output
    assert "Seed 11; 100 bootstrap resamples (auto), 100 sign-flip permutations; verdict " \
           "test: paired test of mean difference 0" in result.output
    assert "| b | a | RR@10 | -0.3750 |" in result.output


def test_compare_on_files_is_identical_across_runs_and_worker_counts(files):
    args = ("--qrels", files / "qrels.txt", files / "a.run", files / "b.run",
            "--bootstrap", 500, "--permutations", 500, "--json")
    outs = {_invoke(*args, "--workers", w).output for w in (1, 2, 1)}
    assert len(outs) == 1


@pytest.mark.parametrize("args, message", [
    (["--qrels", "QRELS", "A"], "--qrels needs two or more run files to compare"),
    (["--qrels", "QRELS", "A", "B", "--baseline", "c"], "--baseline is not one of the runs"),
    (["--qrels", "QRELS", "A", "A"], "a run file is given twice"),
    (["--qrels", "QRELS", "A", "B", "-m", "Judged@10"], "Judged@k describes the pool"),
    (["--qrels", "QRELS", "A", "B", "--per-query", "A"], "not both"),
    (["a", "b", "--seed", "3"], "--seed applies to plain files (--qrels or --per-query)"),
    (["a"], "compare two arms of the experiment, or give --qrels"),
], ids=["one-run", "unknown-baseline", "same-run-twice", "judged", "qrels-and-per-query",
        "seed-in-experiment", "one-arm"])
def test_compare_refuses_bad_arguments_with_a_clear_error(files, args, message):
    paths = {"QRELS": files / "qrels.txt", "A": files / "a.run", "B": files / "b.run"}
    result = _invoke(*[paths.get(a, a) for a in args])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and message in result.output


def test_compare_per_query_refuses_a_non_finite_value_naming_file_and_line(files):
    (files / "pq.tsv").write_text("run\tquery_id\tmeasure\tvalue\na\tq1\tP@5\t0.5\n"
                                  "b\tq1\tP@5\tnan\n")
    result = _invoke("--per-query", files / "pq.tsv")
    assert result.exit_code == 1
    assert "pq.tsv:3: run b, query q1, measure P@5" in result.output
    assert "per-query value must be a finite number" in result.output


def test_compare_groups_refuses_a_query_without_group(files):
    pd.DataFrame({"run": ["a", "a", "b", "b"], "query_id": ["q1", "q2"] * 2, "measure": "P@5",
                  "value": [0.1, 0.2, 0.3, 0.4]}).to_csv(files / "pq.tsv", sep="\t", index=False)
    (files / "g.tsv").write_text("query_id\tgroup\nq1\thead\n")
    result = _invoke("--per-query", files / "pq.tsv", "--groups", files / "g.tsv")
    assert result.exit_code == 1
    assert "a query has no group" in result.output and "query q2" in result.output


def test_compare_help_shows_both_ways_in():
    out = CliRunner().invoke(main, ["compare", "--help"]).output
    assert "--qrels" in out and "--per-query" in out and "--latex" in out


def test_compare_test_sign_flip_puts_the_randomization_test_under_holm(files):
    doc = _json("--qrels", files / "qrels.txt", files / "a.run", files / "b.run", "-m", "RR@10",
                "--bootstrap", 1000, "--permutations", 1000, "--test", "sign-flip",
                "--interval", "bca")
    (c,) = doc["comparisons"]
    # the same exact sign-flip value as above, 2 of 2^3 patterns, now the one Holm reads
    assert c["p_test"] == pytest.approx(2 / 8) and c["p_holm"] == pytest.approx(2 / 8)
    assert c["interval"] == "bca"
    assert doc["settings"]["test"] == "sign-flip" and doc["settings"]["interval"] == "bca"
    assert any("symmetric about 0" in n for n in c["notes"])
