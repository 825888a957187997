"""Every measure relgrade added for trec_eval parity, against independent implementations
on a seeded random qrels/run fixture: trec_eval through pytrec_eval (relevance levels 1 and
2, the judged-docs-only flag included), ir_measures for RBP, ERR (gdeval), Judged, nDCG with
explicit gains and judged-only nDCG/AP.

The fixture has grades -1 (pooled, not judged) to 3, unjudged chunks, score ties, queries
missing from the run, queries with nothing relevant and run queries absent from the qrels.
"""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from relgrade.evaluation.measures import parse_measure, parse_measures
from relgrade.evaluation.metrics import per_query

N_QUERIES = 40
SEED = 20240611


def _fixture(seed: int = SEED, distinct: bool = False):
    rng = np.random.default_rng(seed)
    q_rows, r_rows = [], []
    for i in range(N_QUERIES):
        qid = str(i)  # numeric: gdeval reads no other
        chunks = [f"d{j}" for j in range(60)]
        graded = rng.choice(chunks, size=int(rng.integers(1, 30)), replace=False)
        nothing_relevant = i % 11 == 0
        for c in graded:
            g = 0 if nothing_relevant else int(rng.choice([-1, 0, 1, 2, 3],
                                                          p=[0.1, 0.45, 0.25, 0.12, 0.08]))
            q_rows.append((qid, str(c), g))
        if i % 9 == 4:
            continue  # missing from the run
        retrieved = rng.choice(chunks, size=int(rng.integers(1, 45)), replace=False)
        scores = rng.integers(0, 12, size=len(retrieved)) / 4.0  # ties
        if distinct:  # for implementations that break ties in their own way
            scores = rng.permutation(len(retrieved)) + 0.5
        r_rows += [(qid, str(c), float(s)) for c, s in zip(retrieved, scores)]
    if not distinct:  # gdeval reads numeric query ids only
        r_rows += [("only-in-run", "d1", 1.0)]
    qrels = pd.DataFrame(q_rows, columns=["query_id", "chunk_id", "grade"])
    run = pd.DataFrame(r_rows, columns=["query_id", "chunk_id", "score"])
    run.insert(2, "rank", np.arange(len(run)) + 1)
    return qrels, run


QRELS, RUN = _fixture()
_, RUN_DISTINCT = _fixture(distinct=True)


def _dicts(run=RUN):
    qd, rd = {}, {}
    for q, c, g in QRELS.itertuples(index=False):
        qd.setdefault(q, {})[c] = int(g)
    for q, c, _, s in run.itertuples(index=False):
        rd.setdefault(q, {})[c] = float(s)
    return qd, rd


def _relgrade(names, *, relevant_min=1, run=RUN, missing="skip"):
    measures = parse_measures(names, relevant_min=relevant_min)
    pq = per_query(qrels=QRELS, run=run, measures=measures, on_missing_query=missing,
                   no_relevant="zero", relevant_min=relevant_min)
    return {(m, q): v for q, m, v in pq[["query_id", "measure", "value"]]
            .itertuples(index=False)}, measures


# trec_eval measure -> the pytrec_eval spelling that asks for it
TREC = ["map", "map_cut.5,10,30", "P.5,10,30", "recall.5,10,30", "recip_rank", "Rprec",
        "bpref", "success.1,5,10", "infAP", "ndcg", "ndcg_cut.5,10,30", "num_ret",
        "num_rel", "num_rel_ret", "iprec_at_recall", "set_P", "set_recall"]


@pytest.mark.parametrize("level", [1, 2])
def test_trec_eval_measures_equal_pytrec_eval_per_query(level):
    qd, rd = _dicts()
    evaluator = pytrec_eval.RelevanceEvaluator(qd, set(TREC), relevance_level=level)
    ref = evaluator.evaluate(rd)
    mine, measures = _relgrade(TREC, relevant_min=level)
    from relgrade.evaluation.measures import trec_eval_name

    # map, map_cut x3, P x3, recall x3, recip_rank, Rprec, bpref, success x3, infAP, ndcg,
    # ndcg_cut x3, num_ret, num_rel, num_rel_ret, iprec_at_recall x11, set_P, set_recall
    assert len(measures) == 1 + 3 + 3 + 3 + 1 + 1 + 1 + 3 + 1 + 1 + 3 + 1 + 1 + 1 + 11 + 1 + 1
    checked = old_rule = 0
    for m in measures:
        ref_name = trec_eval_name(m)
        for qid, values in ref.items():
            if m.name == "IPrec":
                # pytrec_eval bundles a trec_eval older than 9.0.8, which placed recall level
                # x at relevant chunk int(x R + 0.9); trec_eval now (and relgrade) rounds x R
                n_rel = values["num_rel"]
                if int(m.cutoff * n_rel + 0.9) != math.floor(m.cutoff * n_rel + 0.5) \
                        and max(1, math.floor(m.cutoff * n_rel + 0.5)) <= values["num_rel_ret"]:
                    old_rule += 1
                    continue
            assert mine[(str(m), qid)] == pytest.approx(values[ref_name], abs=1e-12), \
                (str(m), qid)
            checked += 1
    assert checked + old_rule == len(measures) * len(ref) and len(ref) > 30
    assert old_rule < checked / 20


def test_judged_only_measures_equal_trec_eval_judged_docs_only():
    qd, rd = _dicts()
    evaluator = pytrec_eval.RelevanceEvaluator(qd, {"map", "ndcg_cut.10", "ndcg"},
                                               judged_docs_only_flag=True)
    ref = evaluator.evaluate(rd)
    mine, _ = _relgrade(["AP(judged_only=True)", "nDCG(judged_only=True)@10",
                         "nDCG(judged_only=True)"])
    for qid, values in ref.items():
        assert mine[("AP(judged_only=True)", qid)] == pytest.approx(values["map"], abs=1e-12)
        assert mine[("nDCG(judged_only=True)@10", qid)] == pytest.approx(
            values["ndcg_cut_10"], abs=1e-12)
        assert mine[("nDCG(judged_only=True)", qid)] == pytest.approx(values["ndcg"],
                                                                       abs=1e-12)


IR_MEASURES = ["ERR@10", "ERR@20",
               "Judged@10", "nDCG(gains={0:0,1:1,2:5,3:10})@10", "nDCG(gains={2:3})",
               "AP(judged_only=True)", "nDCG(judged_only=True)@10", "AP(rel=2)@10",
               "Success(rel=2)@5", "NumRet(rel=1)", "Rprec(rel=2)", "Bpref(rel=2)",
               "infAP(rel=2)"]


@pytest.mark.parametrize("name", IR_MEASURES)
def test_measures_equal_ir_measures_per_query(name):
    qd, rd = _dicts(RUN_DISTINCT)
    ref_measure = ir_measures.parse_measure(name)
    qrels = [ir_measures.Qrel(q, d, g) for q, docs in qd.items() for d, g in docs.items()]
    run = [ir_measures.ScoredDoc(q, d, s) for q, docs in rd.items() for d, s in docs.items()]
    ref = {(str(r.measure), r.query_id): r.value
           for r in ir_measures.iter_calc([ref_measure], qrels, run)}
    # ir_measures scores a query missing from the run 0
    mine, measures = _relgrade([name], run=RUN_DISTINCT, missing="zero")
    canonical = str(measures[0])
    assert canonical == str(ref_measure)  # the same canonical name
    pairs = [(q, v) for (m, q), v in ref.items()]
    assert len(pairs) > 30
    tol = 0.5e-5 if name.startswith("ERR") else 1e-9  # gdeval prints 5 decimals
    for qid, value in pairs:
        assert mine[(canonical, qid)] == pytest.approx(value, abs=tol), (name, qid)


def test_every_relgrade_name_round_trips_through_ir_measures():
    # relgrade's own names for what ir_measures does not have
    own = {"RBPResid", "Unjudged"}
    names = ["AP", "AP@10", "AP(rel=2,judged_only=True)", "P@5", "R@10", "RR", "RR@10",
             "Rprec", "Rprec(rel=2)", "Bpref", "Success@5", "infAP", "ERR@10",
             "RBP", "RBP(p=0.9)", "RBP(p=0.95,rel=2)@20", "NumRet", "NumRet(rel=2)",
             "NumRel", "Judged@10", "IPrec@0.5", "IPrec@0.0", "nDCG(gains={2:3})@10",
             "nDCG(dcg='exp-log2',judged_only=True)@10", "RBPResid(p=0.9)", "Unjudged@10"]
    for name in names:
        m = parse_measure(name)
        assert str(parse_measure(str(m))) == str(m)
        if m.name not in own:
            assert str(ir_measures.parse_measure(str(m))) == str(m), name
