"""`relgrade aggregate`: exact report and output files, gold removal, Dawid-Skene, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from click.testing import CliRunner

from relgrade.cli import main

# Twelve pairs of query q1, four of each true grade. "accurate" gives the true grade,
# "flipper" reverses the scale, "noisy" errs on c00 (2 for 0), c03 (1 for 0), c08 (0 for 2).
TRUTH = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
RATERS = {"accurate": TRUTH, "flipper": [2 - t for t in TRUTH],
          "noisy": [2, 0, 0, 1, 1, 1, 1, 1, 0, 2, 2, 2]}
CHUNKS = [f"c{i:02d}" for i in range(12)]
GOLD = {"c01": 0, "c05": 1, "c09": 2, "c10": 2}


def rows(raters=RATERS, **extra):
    return [{"query_id": "q1", "chunk_id": c, "grader": name, "grade": g, **extra}
            for name, grades in raters.items() for c, g in zip(CHUNKS, grades)]


def write_jsonl(path, items):
    path.write_text("".join(json.dumps(r) + "\n" for r in items))
    return path


def gold_file(tmp_path, gold=GOLD):
    return write_jsonl(tmp_path / "gold.jsonl", [{"query_id": "q1", "chunk_id": c, "grade": g}
                                                 for c, g in gold.items()])


def run(*args):
    return CliRunner().invoke(main, ["aggregate", *map(str, args)])


def key_lines(grades):
    return "".join(f'{{"query_id":"q1","chunk_id":"{c}","grade":{g}}}\n'
                   for c, g in zip(CHUNKS, grades))


# Agreement of the three raters (hand-computed). Per-pair counts of grades 0/1/2:
# c00, c09-c11 (1, 0, 2); c01, c02, c08 (2, 0, 1); c03 (1, 1, 1); c04-c07 (0, 3, 0).
# Totals n0 = 11, n1 = 13, n2 = 12 of 36; sum of n_g^2 = 434.
# Fleiss: P-bar = (7 * 1/3 + 0 + 4 * 1) / 12 = 19/36, P_e = 434/1296, kappa = 250/862.
# Krippendorff (units of 3, coincidences / 2): disagreeing coincidences 7 * 2 + 3 = 17,
# nominal alpha = 1 - 35 * 17 / (1296 - 434) = 267/862; interval: observed 7 * 8 + 6 = 62,
# expected 2 * (11*13 + 13*12 + 11*12*4) = 1654, alpha = 1 - 35 * 62 / 1654 = -516/1654;
# ordinal: d01 = 12^2, d12 = 12.5^2, d02 = 24.5^2, observed 7 * 1200.5 + 900.5 = 9304,
# expected 248400, alpha = 1 - 35 * 9304 / 248400 = -77240/248400.
# ratio: delta^2 = ((c - k) / (c + k))^2 is 1 for 0-1 and 0-2, 1/9 for 1-2; observed
# 7 * 2 + 1 + 1 + 1/9 = 145/9, expected 2 * (11*13 + 13*12/9 + 11*12) = 1754/3,
# alpha = 1 - 35 * (145/9) / (1754/3) = 561/15786.
ALL = {"fleiss": 250 / 862, "nominal": 267 / 862, "ordinal": -77240 / 248400,
       "interval": -516 / 1654, "ratio": 561 / 15786, "p_bar": 19 / 36, "p_e": 434 / 1296}
# accurate and noisy only: 9 of 12 pairs agree; n0 = 7, n1 = 9, n2 = 8 of 24.
# Fleiss: (9/12 - 194/576) / (1 - 194/576) = 238/382; nominal 1 - 23 * 6 / 382 = 244/382;
# interval 1 - 23 * 18 / 718 = 304/718; ordinal 1 - 23 * 1217 / 48960 = 20969/48960.
# P-bar = 9/12, P_e = 194/576; ratio: the disagreeing pairs are 0-2, 0-2 and 0-1, observed
# 2 * 3 = 6, expected 2 * (7*9 + 9*8/9 + 7*8) = 254, alpha = 1 - 23 * 6 / 254 = 116/254.
KEPT = {"fleiss": 238 / 382, "nominal": 244 / 382, "ordinal": 20969 / 48960,
        "interval": 304 / 718, "ratio": 116 / 254, "p_bar": 9 / 12, "p_e": 194 / 576}


def test_majority_report_and_key_file_exactly(tmp_path):
    grades = write_jsonl(tmp_path / "grades.jsonl", rows())
    out = tmp_path / "agg.jsonl"
    res = run("--grades", grades, "--out", out)
    assert res.exit_code == 0, res.output
    assert f"{ALL['fleiss']:.4f}" == "0.2900" and f"{ALL['ordinal']:.4f}" == "-0.3110"
    assert [f"{ALL[k]:.4f}" for k in ("p_bar", "p_e", "ratio")] == ["0.5278", "0.3349", "0.0355"]
    assert res.output == f"""\
grades: {grades}: 36 grades from 3 raters on 12 pairs
gold: none given, so no rater is removed

rater     grades  gold  correct  accuracy  within_one  decision
accurate      12     -        -         -           -  kept (no gold table)
flipper       12     -        -         -           -  kept (no gold table)
noisy         12     -        -         -           -  kept (no gold table)

aggregated 12 pairs from 3 raters by majority vote (ties: median of the tied modal grades, \
rounded down to a grade on the scale)
wrote 12 rows to {out}

agreement                    all raters  kept raters
fleiss_kappa                     0.2900       0.2900
fleiss_p_bar                     0.5278       0.5278
fleiss_p_e                       0.3349       0.3349
krippendorff_alpha_nominal       0.3097       0.3097
krippendorff_alpha_ordinal      -0.3110      -0.3110
krippendorff_alpha_interval     -0.3120      -0.3120
krippendorff_alpha_ratio         0.0355       0.0355

high-variance pairs for expert adjudication: 8 (variance >= 0.5, or grades 2 or more apart)
query_id  chunk_id  grade  grades  variance  reason
q1        c00           2  0,2,2     0.8889  variance 0.8889 >= 0.5; grades 0 and 2 both given
q1        c01           0  0,0,2     0.8889  variance 0.8889 >= 0.5; grades 0 and 2 both given
q1        c02           0  0,0,2     0.8889  variance 0.8889 >= 0.5; grades 0 and 2 both given
q1        c03           1  0,1,2     0.6667  variance 0.6667 >= 0.5; grades 0 and 2 both given
q1        c08           0  0,0,2     0.8889  variance 0.8889 >= 0.5; grades 0 and 2 both given
q1        c09           2  0,2,2     0.8889  variance 0.8889 >= 0.5; grades 0 and 2 both given
q1        c10           2  0,2,2     0.8889  variance 0.8889 >= 0.5; grades 0 and 2 both given
q1        c11           2  0,2,2     0.8889  variance 0.8889 >= 0.5; grades 0 and 2 both given
"""
    # majority fails on c00 (2), c03 (three-way tie -> 1) and c08 (0); canonical key form
    assert out.read_text() == key_lines([2, 0, 0, 1, 1, 1, 1, 1, 0, 2, 2, 2])


def test_gold_removes_the_flipper_and_the_rest_are_aggregated(tmp_path):
    # flipper on the gold pairs: c01 2 (0), c05 1 (1), c09 0 (2), c10 0 (2): 1 of 4 exact,
    # within one step 1 of 4. accurate and noisy: 4 of 4.
    grades = write_jsonl(tmp_path / "grades.jsonl", rows())
    gold = gold_file(tmp_path)
    out = tmp_path / "agg.qrels"
    res = run("--grades", grades, "--gold", gold, "--min-gold", 3, "--out", out)
    assert res.exit_code == 0, res.output
    assert [f"{KEPT[k]:.4f}" for k in ("fleiss", "nominal", "ordinal", "interval")] == \
        ["0.6230", "0.6387", "0.4283", "0.4234"]
    assert [f"{KEPT[k]:.4f}" for k in ("p_bar", "p_e", "ratio")] == ["0.7500", "0.3368", "0.4567"]
    assert res.output == f"""\
grades: {grades}: 36 grades from 3 raters on 12 pairs
gold: {gold}: 4 pairs; a rater with at least 3 gold answers is removed below accuracy 0.7

rater     grades  gold  correct  accuracy  within_one  decision
accurate      12     4        4    1.0000      1.0000  kept
flipper       12     4        1    0.2500      0.2500  removed: gold accuracy 0.2500 below \
0.7 on 4 gold answers; all their grades discarded
noisy         12     4        4    1.0000      1.0000  kept

aggregated 12 pairs from 2 raters by majority vote (ties: median of the tied modal grades, \
rounded down to a grade on the scale)
wrote 12 rows to {out}

agreement                    all raters  kept raters
fleiss_kappa                     0.2900       0.6230
fleiss_p_bar                     0.5278       0.7500
fleiss_p_e                       0.3349       0.3368
krippendorff_alpha_nominal       0.3097       0.6387
krippendorff_alpha_ordinal      -0.3110       0.4283
krippendorff_alpha_interval     -0.3120       0.4234
krippendorff_alpha_ratio         0.0355       0.4567

high-variance pairs for expert adjudication: 2 (variance >= 0.5, or grades 2 or more apart)
query_id  chunk_id  grade  grades  variance  reason
q1        c00           1  0,2       1.0000  variance 1.0000 >= 0.5; grades 0 and 2 both given
q1        c08           1  0,2       1.0000  variance 1.0000 >= 0.5; grades 0 and 2 both given
"""
    # two raters left: c00 0-2 and c08 2-0 tie -> 1, c03 0-1 tie -> 0; TREC qrels
    expected = [1, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2]
    assert out.read_text() == "".join(f"q1 0 {c} {g}\n" for c, g in zip(CHUNKS, expected))


def test_dawid_skene_from_the_cli_recovers_the_truth(tmp_path):
    grades = write_jsonl(tmp_path / "grades.jsonl", rows())
    out = tmp_path / "agg.jsonl"
    res = run("--grades", grades, "--method", "dawid-skene", "--out", out, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert out.read_text() == key_lines(TRUTH)
    ds = report["dawid_skene"]
    assert ds["converged"] is True
    assert list(ds["priors"]) == ["0", "1", "2"]
    np.testing.assert_allclose(list(ds["priors"].values()), [1 / 3] * 3, atol=1e-6)
    np.testing.assert_allclose(ds["confusion"]["flipper"], [[0, 0, 1], [0, 1, 0], [1, 0, 0]],
                               atol=1e-6)
    assert report["method"] == "dawid-skene" and report["pairs"] == 12
    assert report["removed"] == [] and report["kept_raters"] == ["accurate", "flipper", "noisy"]
    assert report["agreement"]["all"]["fleiss_kappa"] == report["agreement"]["kept"][
        "fleiss_kappa"]
    assert abs(report["agreement"]["all"]["fleiss_kappa"] - ALL["fleiss"]) < 1e-12
    for key, name in (("p_bar", "fleiss_p_bar"), ("p_e", "fleiss_p_e"),
                      ("ratio", "krippendorff_alpha_ratio")):
        assert abs(report["agreement"]["all"][name] - ALL[key]) < 1e-12, name


def test_a_rater_with_too_few_gold_answers_is_kept_and_flagged(tmp_path):
    late = [{"query_id": "q1", "chunk_id": c, "grader": "late", "grade": 1}
            for c in ("c04", "c05")]  # one gold answer (c05), right
    grades = write_jsonl(tmp_path / "grades.jsonl", rows() + late)
    res = run("--grades", grades, "--gold", gold_file(tmp_path), "--min-gold", 3, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    late_row = next(r for r in report["raters"] if r["grader"] == "late")
    assert late_row == {
        "grader": "late", "grades": 2, "gold_pairs": 1, "correct": 1, "accuracy": 1.0,
        "within_one": 1.0, "removed": False, "flagged": True,
        "decision": "kept, flagged: only 1 gold answer, fewer than min_gold 3; accuracy not "
                    "judged"}
    assert report["removed"] == ["flipper"] and report["flagged_raters"] == ["late"]
    assert report["kept_raters"] == ["accurate", "late", "noisy"]
    assert report["out"] is None and report["gold_pairs"] == 4


def test_parquet_grades_with_rounds(tmp_path):
    one = pd.DataFrame(rows(round=1))
    two = pd.DataFrame(rows(round=2)).assign(grade=2)
    path = tmp_path / "grades.parquet"
    pd.concat([one, two], ignore_index=True).to_parquet(path, index=False)
    res = run("--grades", path)
    assert res.exit_code == 1
    assert res.output == (f"Error: {path}: the grades hold several rounds (found rounds 1, 2). "
                          "Pass --round N to aggregate one round\n")
    out = tmp_path / "r2.jsonl"
    res = run("--grades", path, "--round", 2, "--out", out)
    assert res.exit_code == 0, res.output
    assert out.read_text() == key_lines([2] * 12)
    assert "high-variance pairs for expert adjudication: none" in res.output
    assert "note (kept raters): fleiss_kappa is undefined: every rating is one and the same " \
           "grade" in res.output


def test_exclude_leaves_a_grader_out(tmp_path):
    grades = write_jsonl(tmp_path / "grades.jsonl", rows())
    out = tmp_path / "agg.jsonl"
    res = run("--grades", grades, "--exclude", "flipper", "--out", out, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["kept_raters"] == ["accurate", "noisy"]
    assert out.read_text() == key_lines([1, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2])
    res = run("--grades", grades, "--exclude", "nobody")
    assert res.exit_code == 1
    assert res.output == (f"Error: {grades}: nobody: --exclude names a grader the grades do not "
                          "have\n")


def test_when_every_rater_fails_the_gold_nothing_is_written(tmp_path):
    grades = write_jsonl(tmp_path / "grades.jsonl", rows({"flipper": RATERS["flipper"]}))
    out = tmp_path / "agg.jsonl"
    res = run("--grades", grades, "--gold", gold_file(tmp_path), "--min-gold", 1, "--out", out)
    assert res.exit_code == 1
    assert res.output == (f"Error: {grades}: every rater fell below the gold threshold: nothing "
                          "is left to aggregate. Check the gold table's grades, or lower "
                          "--threshold\n")
    assert not out.exists()


def test_bad_rows_name_the_file_and_line(tmp_path):
    items = rows()
    items[4] = {**items[4], "grade": "1"}
    grades = write_jsonl(tmp_path / "grades.jsonl", items)
    res = run("--grades", grades)
    assert res.exit_code == 1
    assert res.output == (f'Error: {grades}:5: accurate: pair (q1, c04): grade must be an '
                          f'integer (found "1")\n')
    items = rows() + [rows()[0]]
    grades = write_jsonl(tmp_path / "twice.jsonl", items)
    res = run("--grades", grades)
    assert res.output == (f"Error: {grades}:37: accurate: pair (q1, c00): one grader grades "
                          "one (query, chunk) pair twice (found lines 1 and 37). Keep one "
                          "grade per pair and rater, or pass --repeats allowed to count each "
                          "repeated grade\n")
    items = rows()
    items[0] = {**items[0], "grade": 3}
    grades = write_jsonl(tmp_path / "scale.jsonl", items)
    res = run("--grades", grades)
    assert res.output == (f"Error: {grades}:1: accurate: pair (q1, c00): grade outside the "
                          "scale 0,1,2 (found 3)\n")


def test_bad_gold_scale_and_output_format_are_refused(tmp_path):
    grades = write_jsonl(tmp_path / "grades.jsonl", rows())
    gold = gold_file(tmp_path, {"c01": 3})
    res = run("--grades", grades, "--gold", gold)
    assert res.exit_code == 1
    assert res.output == (f"Error: {gold}:1: pair (q1, c01): grade outside the scale 0,1,2 "
                          "(found 3)\n")
    out = tmp_path / "agg.csv"
    res = run("--grades", grades, "--out", out)
    assert res.exit_code == 1
    assert res.output == (f"Error: {out}: unknown output format (use .jsonl or .qrels) "
                          "(found .csv)\n")
    assert not out.exists()
    res = run("--grades", grades, "--threshold", 70)
    assert res.output == ("Error: --threshold is a gold accuracy between 0 and 1 "
                          "(found 70.0)\n")
    res = run("--grades", tmp_path / "grades.csv")
    assert res.output.startswith(f"Error: {tmp_path / 'grades.csv'}: unknown grades format")


def test_a_wider_scale_is_read_from_scale(tmp_path):
    raters = {"a": [3, 0, 1], "b": [3, 0, 2], "c": [2, 0, 2]}
    items = [{"query_id": "q1", "chunk_id": c, "grader": n, "grade": g}
             for n, gs in raters.items() for c, g in zip(CHUNKS, gs)]
    grades = write_jsonl(tmp_path / "grades.jsonl", items)
    out = tmp_path / "agg.jsonl"
    res = run("--grades", grades, "--scale", "0,1,2,3", "--out", out, "--json")
    assert res.exit_code == 0, res.output
    assert out.read_text() == key_lines([3, 0, 2])
    assert json.loads(res.output)["scale"] == [0, 1, 2, 3]
    res = run("--grades", grades)
    assert res.exit_code == 1 and "grade outside the scale 0,1,2 (found 3)" in res.output


def test_the_aggregate_imports_as_a_grader_of_kind_import(tmp_path, monkeypatch):
    # The documented route into the key: aggregate to TREC qrels, then `relgrade grade import`
    # into a grader declared with kind `import`, which the grades and key stages then read.
    repo = Path(__file__).resolve().parents[1]
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["graders"]["raters"] = {"role": "grader", "kind": "import", "family": "crowd",
                                   "person": "three raters, aggregated"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    pool = tmp_path / params["paths"]["pool"]
    pool.parent.mkdir(parents=True)
    pd.DataFrame({"query_id": "q1", "chunk_id": CHUNKS, "inclusion_prob": 1.0}).to_parquet(
        pool, index=False)
    # what an imported grade is made on: the chunks, frozen intents and rubric of today
    p = params["paths"]
    (tmp_path / p["chunks"]).parent.mkdir(parents=True)
    pd.DataFrame({"chunk_id": CHUNKS, "header": "h", "text": "t", "source": "s"}).to_parquet(
        tmp_path / p["chunks"], index=False)
    (tmp_path / p["intents"]).parent.mkdir(parents=True)
    pd.DataFrame({"query_id": ["q1"], "query": ["q"], "intent": ["i"]}).to_parquet(
        tmp_path / p["intents"], index=False)
    (tmp_path / params["grading"]["rubric"]).parent.mkdir(parents=True)
    (tmp_path / params["grading"]["rubric"]).write_text("# rubric\n")
    monkeypatch.chdir(tmp_path)
    grades = write_jsonl(tmp_path / "grades.jsonl", rows())
    res = run("--grades", grades, "--gold", gold_file(tmp_path), "--min-gold", 3,
              "--out", "agg.qrels")
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["grade", "import", "agg.qrels", "--grader", "raters",
                                    "--format", "qrels"])
    assert res.exit_code == 0, res.output
    recorded = [json.loads(line) for line in
                (tmp_path / "data/grades/raters/round-1.jsonl").read_text().splitlines()]
    assert [(r["chunk_id"], r["grade"]) for r in recorded] == list(
        zip(CHUNKS, [1, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2]))
    assert {r["reason"] for r in recorded} == {""}
