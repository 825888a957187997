"""Each measure on a small case worked out by hand, and the rules of measure names.

Query q1 (rel = 1 unless said): qrels a:2, b:0, c:1, d:-1 (pooled, not judged), e:1 (not
retrieved); the run ranks x (not in the qrels), a, b, c, d. Relevant: a, c, e (R = 3),
retrieved at ranks 2 and 4. Query q4: qrels h, i, j at grade 1; the run ranks k, h, i, l, j.
Query q3 has nothing relevant (g:0).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from relgrade.errors import InputError
from relgrade.evaluation.measures import parse_measure, parse_measures, trec_eval_name
from relgrade.evaluation.metrics import per_query

QRELS = pd.DataFrame(
    [("q1", "a", 2), ("q1", "b", 0), ("q1", "c", 1), ("q1", "d", -1), ("q1", "e", 1),
     ("q3", "g", 0), ("q4", "h", 1), ("q4", "i", 1), ("q4", "j", 1)],
    columns=["query_id", "chunk_id", "grade"])
RUN = pd.DataFrame(
    [("q1", c, i + 1, 10.0 - i) for i, c in enumerate("xabcd")]
    + [("q3", "g", 1, 1.0)]
    + [("q4", c, i + 1, 10.0 - i) for i, c in enumerate("khilj")],
    columns=["query_id", "chunk_id", "rank", "score"])

L2 = math.log2


def _value(name, query="q1", **kwargs):
    pq = per_query(qrels=QRELS, run=RUN, measures=[name], **kwargs)
    rows = pq[pq["query_id"] == query]
    return float(rows["value"].iloc[0]) if len(rows) else None


@pytest.mark.parametrize("name, expected", [
    ("AP", (1 / 2 + 2 / 4) / 3),
    ("AP@3", (1 / 2) / 3),
    ("AP(rel=2)", (1 / 2) / 1),
    ("P@2", 1 / 2),
    ("P@5", 2 / 5),
    ("R@5", 2 / 3),
    ("RR", 1 / 2),
    ("RR@1", 0.0),
    ("Rprec", 1 / 3),  # the top R = 3: x, a, b
    ("Success@1", 0.0),
    ("Success@2", 1.0),
    # b (the one judged non-relevant) is above c: c keeps 1 - 1/min(1, 3) = 0; a keeps 1
    ("Bpref", (1 + 0) / 3),
    # a at j = 1: 1/2 + (1/2)(0/1)(eps/2eps); c at j = 3: 1/4 + (3/4)(2/3)((1+eps)/(2+2eps))
    ("infAP", (1 / 2 + (1 / 4 + 3 / 4 * 2 / 3 * 1 / 2)) / 3),
    ("nDCG", (2 / L2(3) + 1 / L2(5)) / (2 + 1 / L2(3) + 1 / L2(4))),
    ("nDCG@2", (2 / L2(3)) / (2 + 1 / L2(3))),
    ("nDCG(dcg='exp-log2')@5", (3 / L2(3) + 1 / L2(5)) / (3 + 1 / L2(3) + 1 / L2(4))),
    ("nDCG(gains={2:3})", (3 / L2(3) + 1 / L2(5)) / (3 + 1 / L2(3) + 1 / L2(4))),
    ("nDCG(gains={0:0,1:0,2:1})", (1 / L2(3)) / 1.0),
    # condensed list: a, b, c (x is unjudged, d's grade is negative)
    ("nDCG(judged_only=True)", (2 + 1 / L2(4)) / (2 + 1 / L2(3) + 1 / L2(4))),
    ("AP(judged_only=True)", (1 / 1 + 2 / 3) / 3),
    # stopping probabilities (2^g - 1)/16: a 3/16 at rank 2, c 1/16 at rank 4
    ("ERR@5", (1 / 2) * (3 / 16) + (1 / 4) * (1 - 3 / 16) * (1 / 16)),
    ("ERR@3", (1 / 2) * (3 / 16)),
    ("ERR(max_grade=2)@5", (1 / 2) * (3 / 4) + (1 / 4) * (1 - 3 / 4) * (1 / 4)),
    ("RBP(p=0.5,rel=1)", 0.5 * (0.5 ** 1 + 0.5 ** 3)),
    ("RBP(p=0.5,rel=1)@3", 0.5 * 0.5 ** 1),
    # graded: gain = grade / 2 (q1's top grade)
    ("RBP(p=0.5)", 0.5 * (0.5 ** 1 * 1.0 + 0.5 ** 3 * 0.5)),
    # unjudged: x at rank 1 and d (grade -1) at rank 5, plus the tail after rank 5
    ("RBPResid(p=0.5)", 0.5 * (0.5 ** 0 + 0.5 ** 4) + 0.5 ** 5),
    ("NumRet", 5.0),
    ("NumRelRet", 2.0),
    ("NumRet(rel=2)", 1.0),
    ("NumRel", 3.0),
    ("NumRel(rel=2)", 1.0),
    ("Judged@5", 4 / 5),   # a, b, c, d are in the qrels, over min(5, 5)
    ("Judged@10", 4 / 5),  # over min(10, 5)
    ("Unjudged@5", 2 / 5),  # x and d, over 5
    ("Unjudged@10", 2 / 10),  # trec_eval divides by the cutoff
    ("IPrec@0.0", 1 / 2),
    ("IPrec@1.0", 0.0),  # only 2 of the 3 relevant are retrieved
])
def test_each_measure_on_the_hand_worked_query(name, expected):
    assert _value(name) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("level, expected", [
    # relevant precisions: h 1/2 (rank 2), i 2/3 (rank 3), j 3/5 (rank 5); level x sits at
    # relevant chunk round(3x), and interpolation takes the best precision from there on
    (0.0, 2 / 3), (0.4, 2 / 3), (0.7, 2 / 3), (0.9, 3 / 5), (1.0, 3 / 5),
])
def test_iprec_interpolates_from_the_level_s_relevant_chunk_on(level, expected):
    assert _value(f"IPrec@{level}", "q4") == pytest.approx(expected, abs=1e-15)


def test_a_query_with_nothing_relevant_is_excluded_or_scored_zero():
    assert _value("AP", "q3") is None
    assert _value("AP", "q3", no_relevant="zero") == 0.0
    assert _value("nDCG@5", "q3", no_relevant="zero") == 0.0
    # counts and judged shares are defined everywhere
    assert _value("NumRet", "q3") == 1.0
    assert _value("Judged@5", "q3") == 1.0
    with pytest.raises(InputError, match="no_relevant must be"):
        _value("AP", no_relevant="maybe")


def test_trec_eval_names_expand_to_relgrade_measures():
    assert [str(m) for m in parse_measures(["map", "P.5,10", "ndcg_cut.10", "recip_rank",
                                            "success.1", "iprec_at_recall.0.5", "rbp.p=0.8",
                                            "unj.5", "num_rel_ret", "ndcg.1=3,2=9"])] == [
        "AP", "P@5", "P@10", "nDCG@10", "RR", "Success@1", "IPrec@0.5", "RBP",
        "Unjudged@5", "NumRet(rel=1)", "nDCG(gains={1:3.0,2:9.0})"]
    assert [str(m) for m in parse_measures(["success"])] == ["Success@1", "Success@5",
                                                             "Success@10"]
    assert len(parse_measures(["ndcg_cut"])) == 9
    # trec_eval's -l sets the relevance level of every measure that reads one
    assert [str(m) for m in parse_measures(["map", "P.5"], relevant_min=2)] == [
        "AP(rel=2)", "P(rel=2)@5"]
    # "P" alone is ir_measures' precision over the whole list, not trec_eval's P set
    assert str(parse_measure("P")) == "P"
    assert trec_eval_name(parse_measure("P")) == "set_P"
    assert trec_eval_name(parse_measure("nDCG(dcg='exp-log2')@10")) is None


@pytest.mark.parametrize("name, message", [
    ("nDGC@10", "nDGC@10: unknown measure (found nDGC). Did you mean nDCG@10?"),
    ("mapp", "mapp: unknown measure (found mapp). Did you mean map?"),
    # case-insensitively, with the cutoff and parameters that followed the name
    ("ndcg@10", "ndcg@10: unknown measure (found ndcg). Did you mean nDCG@10?"),
    ("Ndcg(dcg='exp-log2')@5", "Ndcg(dcg='exp-log2')@5: unknown measure (found Ndcg). "
                               "Did you mean nDCG(dcg='exp-log2')@5?"),
    ("mrr@10", "mrr@10: unknown measure (found mrr). Did you mean RR@10?"),
    ("recall@100", "recall@100: unknown measure (found recall). Did you mean R@100?"),
    ("ndcg_cut@10", "ndcg_cut@10: unknown measure (found ndcg_cut). Did you mean nDCG@10?"),
    ("NDCG_CUT.10", "NDCG_CUT.10: unknown measure (found NDCG_CUT). "
                    "Did you mean ndcg_cut.10?"),
    ("AP@0", "AP@0: a measure's cutoff must be a positive integer (found 0)"),
    ("P@-3", "P@-3: a measure's cutoff must be a positive integer (found -3)"),
    ("P.0", "P.0: a measure's cutoff must be a positive integer (found 0)"),
    ("RBP(p=1.5)", "RBP(p=1.5): RBP's persistence p must be in (0, 1) (found 1.5)"),
    ("RBP(p=0)", "RBP(p=0): RBP's persistence p must be in (0, 1) (found 0)"),
    ("Success", "Success: Success needs a cutoff"),
    ("Rprec@10", "Rprec@10: Rprec takes no cutoff (found @10)"),
    ("IPrec@1.5", "IPrec@1.5: IPrec's recall level must be a number in [0, 1] (found 1.5)"),
    ("IPrec", "IPrec: IPrec needs a recall level"),
    ("nDCG(gains={1:'a'})", "nDCG(gains={1:'a'}): gains must map integer grades to numbers"),
    ("AP(judged_only=1)", "AP(judged_only=1): judged_only must be True or False"),
    ("Bpref(p=0.5)", "Bpref(p=0.5): Bpref takes no parameter `p`"),
    ("P.5,10", "P.5,10: this trec_eval name stands for several measures"),
])
def test_bad_measure_names_say_what_is_wrong(name, message):
    with pytest.raises(InputError) as e:
        parse_measure(name)
    assert str(e.value).startswith(message)
