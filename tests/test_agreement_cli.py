"""`relgrade agreement A B`: exact numbers for JSONL and TREC qrels inputs, errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from relgrade.cli import main

A = [0, 1, 2, 2, 1, 0, 2, 1]
B = [0, 1, 1, 1, 1, 0, 1, 0]


def jsonl(path, grades, *, query="q1", skip=()):
    path.write_text("".join(
        json.dumps({"query_id": query, "chunk_id": 4400 + i, "reason": f"r{i}", "grade": g})
        + "\n" for i, g in enumerate(grades) if i not in skip))
    return path


def qrels(path, grades, *, query="q1", skip=()):
    path.write_text("".join(f"{query} 0 {4400 + i} {g}\n"
                            for i, g in enumerate(grades) if i not in skip))
    return path


def run(*args):
    return CliRunner().invoke(main, ["agreement", *map(str, args)])


EXPECTED_TABLE = """\
pairs                  8
missing                0
weighted_kappa         0.5429
linear_weighted_kappa  0.3846
binary_kappa           0.7143
kappa                  0.2558
raw_agreement          0.5000
disagreement           0.5000
two_step_disagreement  0.0000
relevant_split_share   0.7500

confusion (rows: grade in A, columns: grade in B)
     B=0  B=1  B=2
A=0    2    0    0
A=1    1    2    0
A=2    0    3    0
"""


def test_jsonl_pair_prints_every_measure_and_the_confusion_matrix(tmp_path):
    a, b = jsonl(tmp_path / "a.jsonl", A), jsonl(tmp_path / "b.jsonl", B)
    res = run(a, b)
    assert res.exit_code == 0, res.output
    # weighted kappa = 38/70, binary kappa = 20/28, kappa = 11/43 (see test_agreement.py).
    assert res.output == f"A = {a}\nB = {b}\n" + EXPECTED_TABLE


def test_trec_qrels_pair_gives_the_same_numbers(tmp_path):
    a, b = qrels(tmp_path / "a.qrels", A), qrels(tmp_path / "b.qrels", B)
    res = run(a, b)
    assert res.exit_code == 0, res.output
    assert res.output == f"A = {a}\nB = {b}\n" + EXPECTED_TABLE


def test_json_output_with_missing_pairs_dropped_and_counted(tmp_path):
    # A lacks chunk 4407, B lacks chunk 4400: six pairs left, two missing.
    a = jsonl(tmp_path / "a.jsonl", A, skip=(7,))
    b = qrels(tmp_path / "b.qrels", B, skip=(0,))
    res = run(a, b, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["pairs"], out["missing"]) == (6, 2)
    # Remaining pairs: A = [1,2,2,1,0,2], B = [1,1,1,1,0,1]: p_o = 3/6;
    # marginals A (1, 2, 3), B (1, 5, 0): p_e = (1*1 + 2*5 + 3*0)/36 = 11/36.
    assert out["kappa"] == pytest.approx((3 / 6 - 11 / 36) / (1 - 11 / 36))
    assert out["confusion"] == [[1, 0, 0], [0, 2, 0], [0, 3, 0]]
    assert out["scale"] == [0, 1, 2] and out["relevant_min"] == 1


def test_single_category_prints_undefined_and_the_reason(tmp_path):
    a, b = jsonl(tmp_path / "a.jsonl", [1] * 5), jsonl(tmp_path / "b.jsonl", [1] * 5)
    res = run(a, b)
    assert res.exit_code == 0, res.output
    assert "weighted_kappa         undefined\n" in res.output
    assert "linear_weighted_kappa  undefined\n" in res.output
    assert "raw_agreement          1.0000\n" in res.output
    assert ("note: weighted_kappa is undefined: both raters gave every pair grade 1, so "
            "chance agreement is 1 and kappa is 0/0\n") in res.output


def test_wider_scale_and_relevant_min(tmp_path):
    a = qrels(tmp_path / "a.qrels", [0, 1, 3, 3, 1, 0, 3, 1])
    b = qrels(tmp_path / "b.qrels", [0, 1, 1, 3, 1, 0, 1, 0])
    res = run(a, b, "--scale", "0,1,2,3", "--relevant-min", "2", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["weighted_kappa"] == pytest.approx(13 / 22)  # hand value, test_agreement.py
    # relevant = grade >= 2: A = [0,0,1,1,0,0,1,0], B = [0,0,0,1,0,0,0,0]: p_o = 6/8,
    # p_e = (5*7 + 3*1)/64 = 38/64.
    assert out["binary_kappa"] == pytest.approx((6 / 8 - 38 / 64) / (1 - 38 / 64))


def test_grade_outside_the_scale_names_file_line_and_pair(tmp_path):
    a = jsonl(tmp_path / "a.jsonl", A)
    b = jsonl(tmp_path / "b.jsonl", [0, 1, 3])
    res = run(a, b)
    assert res.exit_code == 1
    assert res.output == (f"Error: {b}:3: pair (q1, 4402): grade outside the scale 0,1,2 "
                          "(found 3)\n")


def test_duplicate_pair_and_bad_scale_are_errors(tmp_path):
    a = jsonl(tmp_path / "a.jsonl", A)
    b = tmp_path / "b.jsonl"
    row = json.dumps({"query_id": "q1", "chunk_id": 1, "reason": "", "grade": 1})
    b.write_text(row + "\n" + row + "\n")
    res = run(a, b)
    assert res.exit_code == 1
    assert ("b.jsonl:2: pair (q1, 1): one (query, chunk) pair is graded twice (found lines 1 "
            "and 2)") in res.output
    res = run(a, a, "--scale", "0,one,2")
    assert res.exit_code == 1
    assert "--scale lists integer grades separated by commas" in res.output


def test_help_describes_the_command():
    res = CliRunner().invoke(main, ["agreement", "--help"])
    assert res.exit_code == 0
    assert "TREC qrels" in res.output and "--relevant-min" in res.output


# A 0-3 scale set in params, relevant from 2: A = 0,1,2,3 against B = 0,2,2,3. Unweighted
# kappa: p_o = 3/4, p_e = 4 x (1/4 x B's share) = 1/16 + 2/16 + 1/16 = 1/4, so 2/3.
# Quadratic weights (i - j)^2 / 9: the one disagreement (1, 2) weighs 1/9, D_o = 1/36;
# D_e = 1/4 x 1/9 x (14/4 + 6/2 + 14/4) = 10/36 (B's grades 0, 2, 2, 3), so 1 - 1/10 = 0.9.
# Binary at >= 2: A 0,0,1,1, B 0,1,1,1: p_o = 3/4, p_e = 1/2 x 3/4 + 1/2 x 1/4 = 1/2: 1/2.
A03, B03 = [0, 1, 2, 3], [0, 2, 2, 3]


def _four_grade_experiment(folder):
    folder.mkdir()
    (folder / "params.yaml").write_text("paths: {}\nscale:\n  grades: [0, 1, 2, 3]\n"
                                        "  relevant_min: 2\n")
    return folder


@pytest.mark.parametrize("where", ["--experiment", "--params", "inside"])
def test_the_scale_and_relevant_grade_default_to_the_experiments_params(tmp_path, monkeypatch,
                                                                         where):
    exp = _four_grade_experiment(tmp_path / "exp")
    a, b = jsonl(tmp_path / "a.jsonl", A03), jsonl(tmp_path / "b.jsonl", B03)
    args = {"--experiment": ["--experiment", exp], "--params": ["--params", exp / "params.yaml"],
            "inside": []}[where]
    if where == "inside":
        monkeypatch.chdir(exp)
    res = run(a, b, "--json", *args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["scale"], out["relevant_min"]) == ([0, 1, 2, 3], 2)
    assert out["kappa"] == pytest.approx(2 / 3)
    assert out["weighted_kappa"] == pytest.approx(0.9)
    assert out["binary_kappa"] == pytest.approx(0.5)
    assert len(out["confusion"]) == 4


def test_an_explicit_scale_and_relevant_grade_win_over_the_params(tmp_path, monkeypatch):
    exp = _four_grade_experiment(tmp_path / "exp")
    a, b = jsonl(tmp_path / "a.jsonl", A03), jsonl(tmp_path / "b.jsonl", B03)
    monkeypatch.chdir(exp)
    res = run(a, b, "--json", "--scale", "0,1,2,3,4", "--relevant-min", "1")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["scale"], out["relevant_min"]) == ([0, 1, 2, 3, 4], 1)
    assert out["binary_kappa"] == 1.0  # A 0,1,1,1 against B 0,1,1,1


def test_outside_an_experiment_the_scale_is_zero_to_two(tmp_path, monkeypatch):
    a, b = jsonl(tmp_path / "a.jsonl", A03), jsonl(tmp_path / "b.jsonl", B03)
    monkeypatch.chdir(tmp_path)
    res = run(a, b)
    assert res.exit_code == 1
    assert res.output == (f"Error: {a}:4: pair (q1, 4403): grade outside the scale 0,1,2 "
                          "(found 3)\n")


def test_a_named_experiment_without_params_is_an_error(tmp_path):
    a, b = jsonl(tmp_path / "a.jsonl", A03), jsonl(tmp_path / "b.jsonl", B03)
    res = run(a, b, "--experiment", tmp_path / "nowhere")
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: {tmp_path / 'nowhere' / 'params.yaml'}: params file "
                                 "not found")


def test_json_holds_fleiss_components_and_krippendorff_alpha_at_every_level(tmp_path):
    # A = 0,1,2,2,1,0,2,1 and B = 0,1,1,1,1,0,1,0: pairs 0, 1, 4, 5 agree, so P̄ = 4/8;
    # of the 16 ratings 5 are 0, 8 are 1, 3 are 2: P_e = (25 + 64 + 9) / 256 = 98/256, and
    # Fleiss' kappa = (1/2 - 98/256) / (1 - 98/256) = 30/158.
    import krippendorff
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    a, b = jsonl(tmp_path / "a.jsonl", A), jsonl(tmp_path / "b.jsonl", B)
    out = json.loads(run(a, b, "--json").output)
    assert out["fleiss_p_bar"] == pytest.approx(1 / 2)
    assert out["fleiss_p_e"] == pytest.approx(98 / 256)
    assert out["fleiss_kappa"] == pytest.approx(30 / 158)
    table, _ = aggregate_raters(list(zip(A, B)))
    assert out["fleiss_kappa"] == pytest.approx(fleiss_kappa(table, method="fleiss"))
    for level in ("nominal", "ordinal", "interval", "ratio"):
        ref = krippendorff.alpha(reliability_data=[A, B], level_of_measurement=level,
                                 value_domain=[0, 1, 2])
        assert out[f"krippendorff_alpha_{level}"] == pytest.approx(ref), level


def test_with_text_labels_the_ratio_alpha_is_not_applicable(tmp_path):
    names = ["bad", "fair", "good"]
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    for path, grades in ((a, A), (b, B)):
        path.write_text("".join(json.dumps({"query_id": "q1", "chunk_id": f"c{i}",
                                            "reason": "r", "grade": names[g]}) + "\n"
                                for i, g in enumerate(grades)))
    out = json.loads(run(a, b, "--json", "--labels", "bad,fair,good").output)
    assert out["krippendorff_alpha_ratio"] is None
    assert ("krippendorff_alpha_ratio is not applicable: --labels grades are ranks without a "
            "true zero") in out["notes"]
    assert out["fleiss_kappa"] == pytest.approx(30 / 158)  # the same grades as ranks


def _recorded(path, rows_made_on):
    """A grader's round file and its bank sidecar: each row with the chunk text it was
    made on (a pair regraded after its chunk changed holds two rows)."""
    from relgrade.graders.store import bank_path
    from relgrade.protocol.sidecar import row_sha256

    rows, bank = [], []
    for q, c, g, text in rows_made_on:
        row = {"query_id": q, "chunk_id": c, "reason": "r", "grade": g}
        rows.append(json.dumps(row, separators=(",", ":")) + "\n")
        bank.append(json.dumps({"query_id": q, "chunk_id": c, "content_sha256": text,
                                "intent_sha256": "i", "rubric_version": "v1",
                                "rubric_sha256": "r", "graded_at": "2026-12-01T12:00:00Z",
                                "row_sha256": row_sha256(row)}) + "\n")
    path.write_text("".join(rows))
    bank_path(path).write_text("".join(bank))
    return path


def test_a_regraded_pair_counts_with_its_latest_grade_and_the_superseded_one_is_noted(tmp_path):
    # A graded c1 2 and c2 1; c1's chunk was edited and regraded 0 (line 3, beside line 1)
    a = _recorded(tmp_path / "round-1.jsonl", [("q1", "c1", 2, "old"), ("q1", "c2", 1, "x"),
                                               ("q1", "c1", 0, "new")])
    b = jsonl(tmp_path / "b.jsonl", [])
    b.write_text("".join(json.dumps({"query_id": "q1", "chunk_id": c, "reason": "", "grade": g})
                         + "\n" for c, g in (("c1", 0), ("c2", 1))))
    out = json.loads(run(a, b, "--json").output)
    # A's latest grades (c1 0, c2 1) agree with B's on both pairs
    assert (out["pairs"], out["missing"], out["raw_agreement"]) == (2, 0, 1.0)
    assert out["confusion"] == [[1, 0, 0], [0, 1, 0], [0, 0, 0]]
    assert (f"A ({a}): 1 superseded grade skipped: a later grade of the same pair, recorded "
            "after its chunk, intent or rubric changed, counts") in out["notes"]
    res = run(a, b)
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[2:4] == ["pairs                  2", "missing                0"]
    assert f"note: A ({a}): 1 superseded grade skipped" in res.output


def test_a_second_grade_made_on_the_same_content_is_still_refused(tmp_path):
    (tmp_path / "grader-a").mkdir()
    a = _recorded(tmp_path / "grader-a/round-1.jsonl", [("q1", "c1", 2, "x"),
                                                        ("q1", "c1", 0, "x")])
    res = run(a, a)
    assert res.exit_code == 1
    assert res.output == (f"Error: {a.as_posix()}: grader-a: pair (q1, c1): second row for one pair, made "
                          "on the same content, intent and rubric. Keep one grade per pair and "
                          "grader\n")


def test_an_empty_recorded_grade_file_is_refused_as_every_judgment_file(tmp_path):
    a = _recorded(tmp_path / "round-1.jsonl", [])
    res = run(a, a)
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: {a}: no judgments in the file")
