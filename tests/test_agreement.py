"""Agreement between graders: kappas over the full scale, undefined cases, missing grades,
published reference values, per-group results, diagnostics and the agreement stage."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import yaml
from sklearn.metrics import cohen_kappa_score

from relgrade.errors import InputError
from relgrade.protocol import agreement as ag
from relgrade.rng import derive_seed
from relgrade.schema import check_scale

REPO = Path(__file__).resolve().parents[1]
SCALE = [0, 1, 2]

# The worked example: rater B never uses grade 2.
A = [0, 1, 2, 2, 1, 0, 2, 1]
B = [0, 1, 1, 1, 1, 0, 1, 0]


def long(rows):
    """A long grades table from (query_id, chunk_id, grader, grade[, reason]) tuples."""
    out = []
    for r in rows:
        q, c, g, grade = r[:4]
        out.append({"query_id": q, "chunk_id": c, "grader": g, "role": "grader", "round": 1,
                    "grade": grade, "reason": r[4] if len(r) > 4 else f"{g} on {c}"})
    return pd.DataFrame(out)


def two_raters(a, b, *, query="q1", names=("ga", "au")):
    rows = [(query, f"c{i}", names[0], x) for i, x in enumerate(a)]
    rows += [(query, f"c{i}", names[1], y) for i, y in enumerate(b)]
    return long(rows)


# --- Cohen's kappa, weighted and unweighted -----------------------------------------

def test_unweighted_kappa_of_the_unused_grade_example_matches_hand_computation():
    # Observed agreement: pairs 1, 2, 5, 6 agree -> p_o = 4/8.
    p_o = 4 / 8
    # Marginals over grades 0, 1, 2: A = (2, 3, 3), B = (3, 5, 0), n = 8.
    p_e = (2 * 3 + 3 * 5 + 3 * 0) / 8**2  # = 21/64
    expected = (p_o - p_e) / (1 - p_e)  # = 11/43
    assert expected == pytest.approx(0.2558, abs=5e-5)
    assert ag.cohen_kappa(A, B, scale=SCALE) == pytest.approx(expected, abs=1e-12)


def test_quadratic_weighted_kappa_of_the_unused_grade_example_matches_hand_computation():
    # Weights (i - j)^2. Observed: three (2, 1) pairs and one (1, 0) pair, weight 1 each.
    observed = (3 * 1 + 1 * 1) / 8
    # Expected from the marginals A = (2, 3, 3), B = (3, 5, 0):
    # (0,1): 2*5*1, (1,0): 3*3*1, (2,0): 3*3*4, (2,1): 3*5*1 -> 70, over 64.
    expected_disagreement = (2 * 5 * 1 + 3 * 3 * 1 + 3 * 3 * 4 + 3 * 5 * 1) / 64
    expected = 1 - observed / expected_disagreement  # = 38/70
    assert expected == pytest.approx(0.5429, abs=5e-5)
    assert ag.weighted_kappa(A, B, scale=SCALE) == pytest.approx(expected, abs=1e-12)


def test_omitting_labels_changes_weighted_kappa_when_an_inner_grade_goes_unused():
    # On the example above both raters together use every grade, so labels happen not to
    # matter there; the trap bites when neither rater uses a grade inside the scale.
    assert cohen_kappa_score(A, B, weights="quadratic") == pytest.approx(38 / 70)
    # 0-3 scale, grade 2 used by nobody: without labels, sklearn puts grade 3 next to 1.
    a = [0, 1, 3, 3, 1, 0, 3, 1]
    b = [0, 1, 1, 3, 1, 0, 1, 0]
    # Observed weighted disagreement: two (3, 1) pairs at weight 4, one (1, 0) at 1 -> 9/8.
    # Marginals a = (2, 3, 0, 3), b = (3, 4, 0, 1) over 0..3; expected weighted sum:
    # a0: 2*4*1 + 2*1*9 = 26; a1: 3*3*1 + 3*1*4 = 21; a3: 3*3*9 + 3*4*4 = 129 -> 176/64.
    hand = 1 - (9 / 8) / (176 / 64)  # = 13/22
    assert ag.weighted_kappa(a, b, scale=[0, 1, 2, 3]) == pytest.approx(hand, abs=1e-12)
    without_labels = cohen_kappa_score(a, b, weights="quadratic")
    assert without_labels == pytest.approx(0.6842105, abs=1e-6)
    assert abs(without_labels - hand) > 0.09


def test_weighted_kappa_matches_published_maple_essaytools_examples():
    # Maplesoft, EssayTools[QuadraticWeightedKappa] help page, examples 1 and 2: scores on
    # a 1-10 scale, Min and Max taken from the data (1 and 10), giving 0.758620689655172
    # and 0.438095238095238. Grade 2 is used by nobody, so the full scale must be passed.
    a = [9, 7, 8, 7, 6, 8, 3, 5, 10]
    scale = list(range(1, 11))
    assert ag.weighted_kappa(a, [8, 8, 6, 6, 7, 6, 1, 4, 8], scale=scale) == \
        pytest.approx(0.758620689655172, abs=1e-12)
    assert ag.weighted_kappa(a, [3, 5, 6, 6, 7, 6, 1, 4, 8], scale=scale) == \
        pytest.approx(0.438095238095238, abs=1e-12)


def test_unweighted_kappa_matches_artstein_and_poesio_table_1():
    # Artstein & Poesio (2008), "Inter-coder agreement for computational linguistics",
    # Computational Linguistics 34(4), Table 1: contingency [[20, 20], [10, 50]], kappa
    # reported as 0.348. By hand: p_o = 0.7, p_e = 0.4*0.3 + 0.6*0.7 = 0.54.
    a = [0] * 40 + [1] * 60
    b = [0] * 20 + [1] * 20 + [0] * 10 + [1] * 50
    value = ag.cohen_kappa(a, b, scale=[0, 1])
    assert value == pytest.approx((0.7 - 0.54) / (1 - 0.54), abs=1e-12)
    assert round(value, 3) == 0.348


def test_binary_kappa_reads_the_relevance_line():
    # A relevant = [0,1,1,1,1,0,1,1], B relevant = [0,1,1,1,1,0,1,0]: p_o = 7/8,
    # marginals A (2 not, 6 relevant), B (3, 5): p_e = (2*3 + 6*5)/64 = 36/64.
    expected = (7 / 8 - 36 / 64) / (1 - 36 / 64)  # = 20/28
    assert ag.binary_kappa(A, B, scale=SCALE, relevant_min=1) == pytest.approx(expected)
    # With relevant_min 2 only the 2s count: A = [0,0,1,1,0,0,1,0], B all 0 -> kappa 0.
    assert ag.binary_kappa(A, B, scale=SCALE, relevant_min=2) == 0.0


def test_agreement_reports_every_measure_and_the_confusion_matrix():
    out = ag.agreement(A, B, scale=SCALE, relevant_min=1)
    assert out["pairs"] == 8
    assert out["raw_agreement"] == 0.5 and out["disagreement"] == 0.5
    assert out["two_step_disagreement"] == 0.0
    # Disagreements: three (2, 1) splits between relevant grades and one (1, 0).
    assert out["relevant_split_share"] == 3 / 4
    assert out["confusion"] == [[2, 0, 0], [1, 2, 0], [0, 3, 0]]
    assert out["notes"] == []


def test_two_step_disagreement_counts_zero_against_two():
    a = [0, 2, 2, 1, 0, 0, 0, 0, 0, 0]
    b = [2, 0, 1, 1, 0, 0, 0, 0, 0, 0]
    assert ag.two_step_disagreement(a, b) == 2 / 10
    assert ag.disagreement(a, b) == 3 / 10
    assert ag.relevant_split_share(a, b, relevant_min=1) == 1 / 3


# --- undefined kappa ----------------------------------------------------------------

def test_single_category_makes_kappa_undefined_with_a_note_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ag.agreement([1] * 5, [1] * 5, scale=SCALE, relevant_min=1, raters=("ga", "au"))
    assert out["weighted_kappa"] is None and out["kappa"] is None
    assert out["binary_kappa"] is None
    assert out["raw_agreement"] == 1.0 and out["disagreement"] == 0.0
    assert out["pairs"] == 5
    assert ("weighted_kappa is undefined: both raters gave every pair grade 1, so chance "
            "agreement is 1 and kappa is 0/0") in out["notes"]
    assert ("binary_kappa is undefined: both raters gave every pair a relevant grade (>= 1), "
            "so chance agreement is 1 and kappa is 0/0") in out["notes"]


def test_one_constant_rater_gives_kappa_zero_with_a_note():
    out = ag.agreement([1] * 5, [0, 1, 1, 2, 1], scale=SCALE, relevant_min=1,
                       raters=("ga", "au"))
    assert out["weighted_kappa"] == 0.0 and out["kappa"] == 0.0
    assert ("weighted_kappa is 0 by construction: ga gave every pair grade 1, so observed "
            "agreement equals chance agreement") in out["notes"]


def test_no_pairs_leaves_every_measure_undefined():
    out = ag.agreement([], [], scale=SCALE, relevant_min=1)
    assert out["pairs"] == 0
    assert all(out[m] is None for m in ag.MEASURES)
    assert out["confusion"] == [[0, 0, 0]] * 3
    assert "weighted_kappa is undefined: no pair has grades from both raters" in out["notes"]


def test_grade_outside_the_scale_is_rejected():
    with pytest.raises(InputError) as e:
        ag.agreement([0, 3], [0, 1], scale=SCALE, relevant_min=1)
    assert str(e.value) == "first rater: grade outside the scale 0, 1, 2 (found 3)"
    with pytest.raises(InputError, match="aligned pair by pair"):
        ag.agreement([0, 1], [0], scale=SCALE, relevant_min=1)


def test_relevant_min_must_be_a_grade_above_the_lowest():
    with pytest.raises(InputError) as e:
        ag.agreement([0], [0], scale=SCALE, relevant_min=0)
    assert "relevant_min must be a grade of the scale above its lowest grade" in str(e.value)
    with pytest.raises(InputError, match="at least two distinct grades"):
        check_scale([1, 1])


# --- pairing ------------------------------------------------------------------------

def test_missing_grades_are_dropped_pairwise_and_counted():
    g = long([("q1", "c1", "ga", 0), ("q1", "c2", "ga", 1), ("q1", "c3", "ga", 2),
              ("q1", "c4", "ga", 2),
              ("q1", "c2", "au", 1), ("q1", "c3", "au", 0), ("q1", "c4", "au", None),
              ("q1", "c5", "au", 1)])
    paired, missing = ag.pair_grades(g, rater_a="ga", rater_b="au")
    # c2, c3 graded by both; c1 only by ga, c4's auditor grade is null, c5 only by au.
    assert list(paired["chunk_id"]) == ["c2", "c3"]
    assert list(paired["grade_a"]) == [1, 2] and list(paired["grade_b"]) == [1, 0]
    assert missing == 3
    assert list(paired.columns) == ag.PAIRED_COLUMNS


def test_pair_grades_filters_round_and_queries_and_normalises_ids():
    g = pd.DataFrame([
        {"query_id": 1, "chunk_id": 4411, "grader": "ga", "round": 1, "grade": 2},
        {"query_id": "1", "chunk_id": "4411", "grader": "au", "round": 1, "grade": 1},
        {"query_id": 1, "chunk_id": 4411, "grader": "au", "round": 2, "grade": 2},
        {"query_id": 2, "chunk_id": 7, "grader": "ga", "round": 1, "grade": 0},
        {"query_id": 2, "chunk_id": 7, "grader": "au", "round": 1, "grade": 0},
    ])
    paired, missing = ag.pair_grades(g, rater_a="ga", rater_b="au", round=1, queries=["1"])
    assert paired[["query_id", "chunk_id", "grade_a", "grade_b"]].values.tolist() == \
        [["1", "4411", 2, 1]]
    assert missing == 0
    with pytest.raises(InputError) as e:
        ag.pair_grades(g, rater_a="ga", rater_b="au")
    assert "au: pair (1, 4411): a grader has two grades for one pair" in str(e.value)
    with pytest.raises(InputError, match="two different graders"):
        ag.pair_grades(g, rater_a="ga", rater_b="ga")


def test_a_fractional_grade_is_rejected_not_truncated():
    g = long([("q1", "c1", "ga", 1.5), ("q1", "c1", "au", 1)])
    with pytest.raises(InputError) as e:
        ag.pair_grades(g, rater_a="ga", rater_b="au")
    assert str(e.value) == "ga: pair (q1, c1): grades must be integers (found 1.5)"


def test_disagreements_list_two_step_splits_first_with_both_reasons():
    g = long([("q1", "c1", "ga", 1, "helps"), ("q1", "c1", "au", 2, "answers"),
              ("q2", "c9", "ga", 0, "off topic"), ("q2", "c9", "au", 2, "the definition"),
              ("q1", "c2", "ga", 0, "no"), ("q1", "c2", "au", 0, "no")])
    paired, _ = ag.pair_grades(g, rater_a="ga", rater_b="au")
    d = ag.disagreements(paired)
    assert d.values.tolist() == [
        ["q2", "c9", 2, 0, 2, "off topic", "the definition"],
        ["q1", "c1", 1, 1, 2, "helps", "answers"],
    ]


# --- per group ----------------------------------------------------------------------

def test_group_agreement_reports_each_query_group():
    g = pd.concat([two_raters([0, 0, 2, 2], [0, 0, 2, 2], query="k1"),
                   two_raters([0, 1, 2, 1], [0, 2, 2, 0], query="w1")], ignore_index=True)
    paired, _ = ag.pair_grades(g, rater_a="ga", rater_b="au")
    groups = pd.DataFrame({"query_id": ["k1", "w1", "k2"],
                           "group": ["keyword", "question", "empty"]})
    out = ag.group_agreement(paired, groups, scale=SCALE, relevant_min=1)
    assert sorted(out) == ["empty", "keyword", "question"]
    assert out["keyword"]["weighted_kappa"] == 1.0 and out["keyword"]["pairs"] == 4
    assert out["empty"]["pairs"] == 0 and out["empty"]["weighted_kappa"] is None
    # question: a = [0,1,2,1], b = [0,2,2,0]: two disagreements, one 1-vs-2 split.
    assert out["question"]["disagreement"] == 0.5
    assert out["question"]["relevant_split_share"] == 0.5
    with pytest.raises(InputError, match="not in the queries table"):
        ag.group_agreement(paired, groups[groups["query_id"] != "w1"], scale=SCALE,
                           relevant_min=1)


# --- several raters -----------------------------------------------------------------

def test_fleiss_kappa_matches_the_formula_worked_by_hand():
    # Three raters, four pairs, counts per grade 0/1/2: [3,0,0], [1,2,0], [0,1,2], [0,0,3].
    g = long([("q", "c1", "r1", 0), ("q", "c1", "r2", 0), ("q", "c1", "r3", 0),
              ("q", "c2", "r1", 0), ("q", "c2", "r2", 1), ("q", "c2", "r3", 1),
              ("q", "c3", "r1", 1), ("q", "c3", "r2", 2), ("q", "c3", "r3", 2),
              ("q", "c4", "r1", 2), ("q", "c4", "r2", 2), ("q", "c4", "r3", 2)])
    # P_i = (sum_j n_ij^2 - n) / (n (n - 1)) with n = 3: 1, 1/3, 1/3, 1 -> P_bar = 2/3.
    p_bar = (1 + 1 / 3 + 1 / 3 + 1) / 4
    # p_j = (4, 3, 5) / 12 -> P_e = 1/9 + 1/16 + 25/144 = 25/72.
    p_e = (4 / 12) ** 2 + (3 / 12) ** 2 + (5 / 12) ** 2
    expected = (p_bar - p_e) / (1 - p_e)  # = 23/47
    assert ag.fleiss_kappa(g, scale=SCALE) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(23 / 47)


def test_fleiss_kappa_matches_the_wikipedia_reference_table():
    # The 10 subjects x 14 raters x 5 categories example of the Wikipedia article on
    # Fleiss' kappa (P_bar = 0.378, P_e = 0.213, kappa = 0.210).
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
             [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
             [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    rows = []
    for i, counts in enumerate(table):
        rater = 0
        for grade, n in enumerate(counts):
            for _ in range(n):
                rows.append((f"q{i}", "c", f"r{rater}", grade))
                rater += 1
    assert round(ag.fleiss_kappa(long(rows), scale=[0, 1, 2, 3, 4]), 3) == 0.210


def test_fleiss_kappa_drops_pairs_with_fewer_ratings_and_counts_them():
    g = long([("q", "c1", "r1", 0), ("q", "c1", "r2", 0), ("q", "c1", "r3", 1),
              ("q", "c2", "r1", 2), ("q", "c2", "r2", 2), ("q", "c2", "r3", 2),
              ("q", "c3", "r1", 0), ("q", "c3", "r2", 1)])
    counts, dropped = ag.rating_counts(g, scale=SCALE)
    assert dropped == 1
    assert counts.values.tolist() == [[2, 1, 0], [0, 0, 3]]
    out = ag.multi_rater_agreement(g, scale=SCALE)
    assert out["pairs"] == 2 and out["dropped"] == 1 and out["raters"] == 3
    assert "fleiss_kappa leaves out 1 pair(s) with fewer ratings than the others" in out["notes"]


def test_krippendorff_alpha_matches_krippendorff_2011_reference_data():
    # K. Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C:
    # four observers, twelve units, missing values; alpha nominal 0.743, interval 0.849.
    data = {"A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
            "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
            "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
            "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]}
    rows = [("u", f"unit{i:02d}", rater, v) for rater, vals in data.items()
            for i, v in enumerate(vals) if v is not None]
    g = long(rows)
    scale = [1, 2, 3, 4, 5]
    assert round(ag.krippendorff_alpha(g, scale=scale, level="nominal"), 3) == 0.743
    assert round(ag.krippendorff_alpha(g, scale=scale, level="interval"), 3) == 0.849
    assert round(ag.krippendorff_alpha(g, scale=scale, level="ordinal"), 3) == 0.815


def test_multi_rater_measures_are_undefined_when_every_rating_is_the_same():
    g = long([("q", f"c{i}", r, 1) for i in range(3) for r in ("r1", "r2", "r3")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ag.multi_rater_agreement(g, scale=SCALE)
    assert out["fleiss_kappa"] is None and out["krippendorff_alpha_ordinal"] is None
    assert any(n.startswith("fleiss_kappa is undefined: every rating is one and the same")
               for n in out["notes"])
    with pytest.raises(InputError, match="unknown level"):
        ag.krippendorff_alpha(g, scale=SCALE, level="ratio-ish")


# --- the audit report ---------------------------------------------------------------

def audit_inputs():
    grades = pd.concat([
        two_raters([0, 0, 1, 2, 2], [0, 0, 1, 2, 1], query="k1", names=("grader-a", "auditor-b")),
        two_raters([0, 1, 2, 0], [0, 1, 2, 2], query="w1", names=("grader-a", "auditor-b")),
        # a query outside the audit: the grader only.
        long([("x9", "c0", "grader-a", 2)]),
    ], ignore_index=True)
    queries = pd.DataFrame({"query_id": ["k1", "w1", "x9"], "query": ["a", "b", "c"],
                            "group": ["keyword", "question", "keyword"]})
    return grades, queries


def test_audit_agreement_compares_grader_and_auditor_on_the_audit_queries():
    grades, queries = audit_inputs()
    before = grades.copy()
    rep = ag.audit_agreement(grades, audit_ids=["k1", "w1"], queries=queries,
                             grader="grader-a", auditor="auditor-b", round=1, scale=SCALE,
                             relevant_min=1)
    pd.testing.assert_frame_equal(grades, before)  # the input is never modified
    m = rep.metrics
    assert (m["pairs"], m["missing"], m["queries"], m["round"]) == (9, 0, 2, 1)
    a = [0, 0, 1, 2, 2, 0, 1, 2, 0]
    b = [0, 0, 1, 2, 1, 0, 1, 2, 2]
    assert m["weighted_kappa"] == pytest.approx(cohen_kappa_score(a, b, labels=SCALE,
                                                                  weights="quadratic"))
    assert m["two_step_disagreement"] == pytest.approx(1 / 9)
    assert sorted(m["groups"]) == ["keyword", "question"]
    assert m["groups"]["keyword"]["pairs"] == 5
    assert rep.confusion.values.tolist() == [list(t) for t in zip(a, b)]
    assert list(rep.disagreements["chunk_id"]) == ["c3", "c4"]
    first = rep.disagreements.iloc[0]
    assert (first["query_id"], first["step"], first["grader_grade"], first["auditor_grade"],
            first["group"]) == ("w1", 2, 0, 2, "question")
    assert m["diagnostics"]["graders"]["grader-a"]["grades"] == 10


def test_audit_agreement_reports_pairs_zero_before_the_auditor_has_graded():
    grades, queries = audit_inputs()
    grades = grades[grades["grader"] == "grader-a"]
    rep = ag.audit_agreement(grades, audit_ids=["k1", "w1"], queries=queries,
                             grader="grader-a", auditor="auditor-b", round=1, scale=SCALE,
                             relevant_min=1)
    assert rep.metrics["pairs"] == 0 and rep.metrics["missing"] == 9
    assert rep.metrics["weighted_kappa"] is None
    assert rep.metrics["notes"][0] == ("auditor-b has no grades in round 1 yet: the measures "
                                       "are undefined and the gate fails")
    assert rep.confusion.empty and rep.disagreements.empty


def test_audit_query_missing_from_the_queries_table_is_an_error():
    grades, queries = audit_inputs()
    with pytest.raises(InputError) as e:
        ag.audit_agreement(grades, audit_ids=["k1", "zz"], queries=queries,
                           grader="grader-a", auditor="auditor-b", round=1, scale=SCALE,
                           relevant_min=1)
    assert str(e.value).startswith("zz: an audit query is not in the queries table")


# --- the stage ----------------------------------------------------------------------

def write_experiment(tmp_path, grades, queries, audit_ids, orders=None):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    p = params["paths"]
    for key in ("grades", "queries", "audit"):
        (tmp_path / p[key]).parent.mkdir(parents=True, exist_ok=True)
    grades.to_parquet(tmp_path / p["grades"], index=False)
    queries.to_parquet(tmp_path / p["queries"], index=False)
    (tmp_path / p["audit"]).write_text("".join(
        json.dumps({"query_id": q, "group": "g", "unique_share": 0.5, "reason": "r"}) + "\n"
        for q in audit_ids))
    if orders is not None:
        (tmp_path / p["orders"]).parent.mkdir(parents=True, exist_ok=True)
        orders.to_parquet(tmp_path / p["orders"], index=False)
    return p


def run_stage_script(name, cwd):
    return subprocess.run([sys.executable, str(REPO / "stages" / f"{name}.py")], cwd=cwd,
                          capture_output=True, text=True)


def test_agreement_stage_writes_metrics_confusion_and_private_disagreements(tmp_path):
    grades, queries = audit_inputs()
    orders = pd.DataFrame({"query_id": grades["query_id"], "chunk_id": grades["chunk_id"],
                           "role": "grader", "round": 1,
                           "position": grades.groupby(["query_id", "grader"]).cumcount()})
    orders = orders.drop_duplicates(["query_id", "chunk_id"])
    p = write_experiment(tmp_path, grades, queries, ["k1", "w1"], orders)
    done = run_stage_script("agreement", tmp_path)
    assert done.returncode == 0, done.stderr
    m = json.loads((tmp_path / p["agreement"]).read_text())
    assert m["pairs"] == 9 and m["missing"] == 0
    assert set(m) >= {"pairs", "weighted_kappa", "binary_kappa", "disagreement",
                      "two_step_disagreement", "missing", "raw_agreement", "notes", "groups"}
    # The kappas' intervals and bands, with the seed derived from params and recorded.
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    assert m["bootstrap"]["seed"] == derive_seed(params["seed"], "agreement", 1)
    assert m["bootstrap"]["resamples"] == params["agreement"]["bootstrap"]
    assert m["intervals"]["weighted_kappa"]["low"] <= m["weighted_kappa"] \
        <= m["intervals"]["weighted_kappa"]["high"]
    assert set(m["bands"]) == {"weighted_kappa", "binary_kappa"}
    # Diagnostics sit in their own file, outside the gate's measures.
    assert "diagnostics" not in m
    diag = json.loads((tmp_path / p["diagnostics"]).read_text())
    assert set(diag["graders"]["grader-a"]["mean_by_third"]) <= {"first", "middle", "last"}
    lines = (tmp_path / p["confusion"]).read_text().splitlines()
    assert lines[0] == "grader,auditor" and len(lines) == 10 and lines[1] == "0,0"
    rows = [json.loads(x) for x in (tmp_path / p["disagreements"]).read_text().splitlines()]
    assert [r["chunk_id"] for r in rows] == ["c3", "c4"]
    assert rows[0]["grader_reason"] == "grader-a on c3"


def test_agreement_stage_reports_even_before_the_auditor_has_graded(tmp_path):
    grades, queries = audit_inputs()
    p = write_experiment(tmp_path, grades[grades["grader"] == "grader-a"], queries,
                         ["k1", "w1"])
    done = run_stage_script("agreement", tmp_path)
    assert done.returncode == 0, done.stderr
    m = json.loads((tmp_path / p["agreement"]).read_text())
    assert m["pairs"] == 0 and m["weighted_kappa"] is None
    assert "auditor-b has no grades in round 1 yet" in done.stdout
    assert (tmp_path / p["confusion"]).read_text() == "grader,auditor\n"


def test_agreement_stage_reports_a_sampled_graders_self_consistency_beside_the_audit(tmp_path):
    grades, queries = audit_inputs()
    p = write_experiment(tmp_path, grades, queries, ["k1", "w1"])
    folder = tmp_path / p["grades_in"] / "grader-a"
    folder.mkdir(parents=True)
    (folder / "round-1.consistency.json").write_text(json.dumps({
        "samples": 3, "pairs": 10, "incomplete_pairs": 0, "fleiss_kappa": 0.5,
        "unanimous_share": 0.7, "mean_pairwise_agreement": 0.8, "ties": 1,
        "tie_rule": "median", "notes": []}))
    done = run_stage_script("agreement", tmp_path)
    assert done.returncode == 0, done.stderr
    m = json.loads((tmp_path / p["agreement"]).read_text())
    assert m["self_consistency"] == {"grader-a": {"samples": 3, "pairs": 10,
                                                  "fleiss_kappa": 0.5, "unanimous_share": 0.7}}


def test_agreement_stage_without_sampling_reports_no_self_consistency(tmp_path):
    grades, queries = audit_inputs()
    p = write_experiment(tmp_path, grades, queries, ["k1", "w1"])
    done = run_stage_script("agreement", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "self_consistency" not in json.loads((tmp_path / p["agreement"]).read_text())
