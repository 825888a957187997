"""relgrade's metrics against independent implementations on a seeded random experiment.

trec_eval (through pytrec_eval) for linear-gain nDCG@k, recall@k, P@k and reciprocal rank;
ranx's ``ndcg_burges`` and a direct Python computation for exp-gain nDCG@k; ir_measures for
Judged@k. The experiment has grades 0-2, unjudged chunks, score ties, queries missing from
the run, queries with nothing relevant and run queries absent from the qrels.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from relgrade.evaluation.metrics import excluded_queries, per_query

CUTOFFS = (3, 5, 10)
N_QUERIES = 50


def _experiment(seed: int, distinct_scores: bool = False):
    rng = np.random.default_rng(seed)
    q_rows, r_rows = [], []
    for i in range(N_QUERIES):
        qid = str(i)  # numeric-looking ids: "10" sorts before "9"
        chunks = [f"d{j}" for j in range(40)]
        graded = rng.choice(chunks, size=int(rng.integers(1, 16)), replace=False)
        nothing_relevant = i % 13 == 0
        for c in graded:
            g = 0 if nothing_relevant else int(rng.choice(3, p=[0.55, 0.3, 0.15]))
            q_rows.append((qid, str(c), g))
        if i % 7 == 3:
            continue  # missing from the run
        retrieved = rng.choice(chunks, size=int(rng.integers(1, 25)), replace=False)
        if distinct_scores:
            scores = rng.permutation(len(retrieved)) + rng.random() * 0.5
        else:
            scores = rng.integers(0, 6, size=len(retrieved)) / 2.0  # many ties
        for c, s in zip(retrieved, scores):
            r_rows.append((qid, str(c), float(s)))
    for c in ("d1", "d2"):
        r_rows.append(("only-in-run", c, 1.0))
    qrels = pd.DataFrame(q_rows, columns=["query_id", "chunk_id", "grade"])
    run = pd.DataFrame(r_rows, columns=["query_id", "chunk_id", "score"])
    # ranks that disagree with the scores, to show the rank column is ignored
    run.insert(2, "rank", rng.permutation(len(run)) + 1)
    return qrels, run


def _dicts(qrels, run):
    qd, rd = {}, {}
    for q, c, g in qrels.itertuples(index=False):
        qd.setdefault(q, {})[c] = int(g)
    for q, c, _, s in run.itertuples(index=False):
        rd.setdefault(q, {})[c] = float(s)
    return qd, rd


def _trec_order(docs: dict) -> list:
    """trec_eval's ranking: score descending, then docno descending (strcmp)."""
    return [d for d, _ in sorted(docs.items(),
                                 key=lambda kv: (-kv[1], [-b for b in kv[0].encode()] + [1]))]


def _table(pq):
    return {(q, m): v for q, m, v in pq.itertuples(index=False)}


def _evaluable(qd, rd):
    """Queries trec_eval scores (in both) that have something relevant."""
    return sorted(q for q in qd if q in rd and any(g >= 1 for g in qd[q].values()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trec_eval_measures_match_pytrec_eval(seed):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _experiment(seed)
    qd, rd = _dicts(qrels, run)
    ks = ",".join(map(str, CUTOFFS))
    ev = pytrec_eval.RelevanceEvaluator(qd, {f"ndcg_cut.{ks}", f"recall.{ks}", f"P.{ks}",
                                             "recip_rank"})
    ref = ev.evaluate(rd)
    names = {f"nDCG@{k}": f"ndcg_cut_{k}" for k in CUTOFFS}
    names |= {f"R@{k}": f"recall_{k}" for k in CUTOFFS}
    names |= {f"P@{k}": f"P_{k}" for k in CUTOFFS}
    names["RR"] = "recip_rank"
    ours = _table(per_query(qrels=qrels, run=run, measures=list(names),
                            on_missing_query="skip"))
    queries = _evaluable(qd, rd)
    assert len(queries) > 30
    compared = 0
    for q in queries:
        for ours_name, ref_name in names.items():
            assert ours[(q, ours_name)] == pytest.approx(ref[q][ref_name], abs=1e-9), (q, ours_name)
            compared += 1
    assert compared == len(queries) * len(names)
    # what trec_eval skips (missing from the run) relgrade's protocol rule scores 0
    zero = _table(per_query(qrels=qrels, run=run, measures=["nDCG@10"]))
    missing = [q for q in qd if q not in rd and any(g >= 1 for g in qd[q].values())]
    assert missing and all(zero[(q, "nDCG@10")] == 0.0 for q in missing)
    # and a query with nothing relevant is left out, not scored
    none = excluded_queries(qrels, ["nDCG@10"])["nDCG@10"]
    assert none and not any((q, "nDCG@10") in zero for q in none)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rr_at_k_matches_recip_rank_on_the_run_cut_at_k(seed):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _experiment(seed)
    qd, rd = _dicts(qrels, run)
    ev = pytrec_eval.RelevanceEvaluator(qd, {"recip_rank"})
    ours = _table(per_query(qrels=qrels, run=run, measures=[f"RR@{k}" for k in CUTOFFS],
                            on_missing_query="skip"))
    queries = _evaluable(qd, rd)
    for k in CUTOFFS:
        cut = {q: {d: rd[q][d] for d in _trec_order(rd[q])[:k]} for q in rd}
        ref = ev.evaluate(cut)
        for q in queries:
            assert ours[(q, f"RR@{k}")] == pytest.approx(ref[q]["recip_rank"], abs=1e-9)


def _exp_ndcg(grades: dict, ranking: list, k: int) -> float:
    dcg = sum((2 ** grades.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exp_gain_ndcg_matches_a_direct_computation_with_ties(seed):
    qrels, run = _experiment(seed)
    qd, rd = _dicts(qrels, run)
    measures = [f"nDCG(dcg='exp-log2')@{k}" for k in CUTOFFS]
    ours = _table(per_query(qrels=qrels, run=run, measures=measures, on_missing_query="skip"))
    for q in _evaluable(qd, rd):
        ranking = _trec_order(rd[q])
        for k, m in zip(CUTOFFS, measures):
            assert ours[(q, m)] == pytest.approx(_exp_ndcg(qd[q], ranking, k), abs=1e-12)


#: ranx's ``ndcg_burges`` per query, computed in a child process with numba's compiler off
#: (``NUMBA_DISABLE_JIT=1``): ranx's own Python source for the metric, its Qrels and its Run,
#: run by the interpreter. Compiled, the same code first costs about 30 CPU-seconds of
#: numba's compilation (its Qrels and Run constructors, then the metric; cached afterwards
#: only where ranx's installed folder is writable), for 50 queries that take milliseconds.
#: Reads ``{"seeds": {seed: [qrels, run]}, "cutoffs": [...]}`` (dicts by query, ranx's input)
#: on stdin; writes ``{"seed@k": [[query_id, value], ...]}``, in the order of
#: ``ranx.Run.keys()``.
_RANX_NDCG_BURGES = """
import json, sys
import numba
import ranx
assert numba.config.DISABLE_JIT
given = json.load(sys.stdin)
values = {}
for seed, (qd, rd) in given["seeds"].items():
    qrels, run = ranx.Qrels(qd), ranx.Run(rd)
    for k in given["cutoffs"]:
        ref = ranx.evaluate(qrels, run, f"ndcg_burges@{k}", return_mean=False)
        values[f"{seed}@{k}"] = [[q, float(v)] for q, v in zip(run.keys(), ref)]
json.dump(values, sys.stdout)
"""


@pytest.fixture(scope="module")
def ranx_ndcg_burges():
    """ranx's exp-gain nDCG (``ndcg_burges@k``) of the seeded experiments with distinct
    scores, seeds 0 and 1, on the queries trec_eval scores: ``{(seed, k): [(query_id,
    value), ...]}`` in ranx's order of the run's queries. One child process for both seeds
    (module scope); skipped where ranx is not installed."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("ranx")
    seeds = {}
    for seed in (0, 1):
        qrels, run = _experiment(seed, distinct_scores=True)  # ranx's tie order is its own
        qd, rd = _dicts(qrels, run)
        queries = _evaluable(qd, rd)
        seeds[seed] = [{q: qd[q] for q in queries}, {q: rd[q] for q in queries}]
    proc = subprocess.run([sys.executable, "-c", _RANX_NDCG_BURGES],
                          input=json.dumps({"seeds": seeds, "cutoffs": list(CUTOFFS)}),
                          capture_output=True, text=True,
                          env=os.environ | {"NUMBA_DISABLE_JIT": "1"})
    assert proc.returncode == 0, proc.stderr
    return {tuple(map(int, key.split("@"))): [tuple(x) for x in pairs]
            for key, pairs in json.loads(proc.stdout).items()}


@pytest.mark.parametrize("seed", [0, 1])
def test_exp_gain_ndcg_matches_ranx_ndcg_burges(seed, ranx_ndcg_burges):
    qrels, run = _experiment(seed, distinct_scores=True)  # ranx's tie order is its own
    qd, rd = _dicts(qrels, run)
    queries = _evaluable(qd, rd)
    measures = [f"nDCG(dcg='exp-log2')@{k}" for k in CUTOFFS]
    ours = _table(per_query(qrels=qrels, run=run, measures=measures, on_missing_query="skip"))
    for k, m in zip(CUTOFFS, measures):
        ref = ranx_ndcg_burges[(seed, k)]
        assert sorted(q for q, _ in ref) == queries  # ranx scored every query given it
        for q, value in ref:
            assert ours[(q, m)] == pytest.approx(value, abs=1e-9), (q, m)


@pytest.mark.parametrize("seed", [0, 1])
def test_judged_at_k_matches_ir_measures(seed):
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = _experiment(seed, distinct_scores=True)  # ir_measures breaks ties its own way
    qd, rd = _dicts(qrels, run)
    ref_qrels = [ir_measures.Qrel(q, c, int(g)) for q, c, g in qrels.itertuples(index=False)]
    ref_run = [ir_measures.ScoredDoc(q, c, float(s)) for q, c, _, s in run.itertuples(index=False)]
    ref_measures = [ir_measures.parse_measure(f"Judged@{k}") for k in CUTOFFS]
    ref = {(m.query_id, str(m.measure)): m.value
           for m in ir_measures.iter_calc(ref_measures, ref_qrels, ref_run)}
    # ir_measures scores a query missing from the run 0, as relgrade's protocol rule does
    ours = _table(per_query(qrels=qrels, run=run, measures=[f"Judged@{k}" for k in CUTOFFS]))
    assert ref and set(ref) == set(ours)
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, abs=1e-12), key
