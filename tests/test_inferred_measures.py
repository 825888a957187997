"""xinfAP and infNDCG from a sampled pool's inclusion probabilities (Yilmaz, Kanoulas &
Aslam 2008): a case worked out by hand, NIST sample_eval.pl's printed values, AP and nDCG
when every probability is 1, unbiasedness over every possible sample and over seeded
samples, and the inclusion file's rules.

Query 1: stratum 1 (every pooled chunk judged, pi = 1) a:2, b:0, c:1, d:1; stratum 2 (the
tail: 4 pooled chunks, 2 drawn, pi = 1/2) t1:1, t4:0, t2 and t3 not drawn. The run ranks
a, t1, t2, b, c, t3, t4, d. Query 2: stratum 1 p:1; stratum 2 (6 pooled, 3 drawn, pi = 1/2)
u1:1, u2:1, u3:0. The run ranks p, u4, u1, u3, u2.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError
from relgrade.evaluation.measures import parse_measure
from relgrade.evaluation.metrics import inclusion_at, index_qrels, per_query
from relgrade.io.trec import read_inclusion, read_trec_inclusion

L2 = math.log2

PRELS = """\
1 0 a 1 2
1 0 b 1 0
1 0 c 1 1
1 0 d 1 1
1 0 t1 2 1
1 0 t2 2 -1
1 0 t3 2 -1
1 0 t4 2 0
2 0 p 1 1
2 0 u1 2 1
2 0 u2 2 1
2 0 u3 2 0
2 0 u4 2 -1
2 0 u5 2 -1
2 0 u6 2 -1
"""
QRELS = pd.DataFrame(
    [("1", "a", 2), ("1", "b", 0), ("1", "c", 1), ("1", "d", 1), ("1", "t1", 1),
     ("1", "t4", 0), ("2", "p", 1), ("2", "u1", 1), ("2", "u2", 1), ("2", "u3", 0)],
    columns=["query_id", "chunk_id", "grade"])
RUN = pd.DataFrame(
    [("1", c, i + 1, 10.0 - i) for i, c in enumerate(["a", "t1", "t2", "b", "c", "t3", "t4",
                                                        "d"])]
    + [("2", c, i + 1, 10.0 - i) for i, c in enumerate(["p", "u4", "u1", "u3", "u2"])],
    columns=["query_id", "chunk_id", "rank", "score"])

# query 1: precision estimates at a, t1, c, d; R^ = 3 (a, c, d) + 1 / (1/2) (t1) = 5
Q1_XINFAP = (1 + 1 / 0.5 * (1 + 1) / 2 + (1 + 1 + 2) / 5 + (1 + 2 + 2) / 8) / 5
# query 2: u1 at 3 sees p (1); u2 at 5 sees p (1) and u1 of its own stratum, which stands
# for (k/pi - 1) / (k - 1) = (6 - 1) / (3 - 1) = 2.5 chunks given u2 was drawn; R^ = 1 + 2 + 2
Q2_XINFAP = (1 + 2 * (1 + 1) / 3 + 2 * (1 + 1 + 2.5) / 5) / 5
Q1_INFNDCG = (2 + 2 / L2(3) + 1 / L2(6) + 1 / L2(9)) / (
    2 + 1 / L2(3) + 1 / L2(4) + 1 / L2(5) + 1 / L2(6))  # ideal: one 2, 1 + 1 + 2 ones
Q2_INFNDCG = (1 + 2 / L2(4) + 2 / L2(6)) / sum(1 / L2(r + 1) for r in range(1, 6))


@pytest.fixture()
def inclusion(tmp_path):
    path = tmp_path / "pool.prels"
    path.write_text(PRELS)
    return read_trec_inclusion(path)


def _values(measures, inclusion, qrels=QRELS, run=RUN):
    pq = per_query(qrels=qrels, run=run, measures=measures, inclusion=inclusion)
    return {(q, m): v for q, m, v in pq[["query_id", "measure", "value"]].itertuples(
        index=False)}


def test_xinfap_and_infndcg_on_the_case_worked_by_hand(inclusion):
    v = _values(["xinfAP", "infNDCG", "xinfAP@5", "infNDCG@3"], inclusion)
    assert v[("1", "xinfAP")] == pytest.approx(Q1_XINFAP, abs=1e-12)
    assert v[("2", "xinfAP")] == pytest.approx(Q2_XINFAP, abs=1e-12)
    assert v[("1", "infNDCG")] == pytest.approx(Q1_INFNDCG, abs=1e-12)
    assert v[("2", "infNDCG")] == pytest.approx(Q2_INFNDCG, abs=1e-12)
    # cut at 5: d (rank 8) drops out of the numerator, not of R^
    assert v[("1", "xinfAP@5")] == pytest.approx((1 + 2 + 4 / 5) / 5, abs=1e-12)
    # cut at 3: a, t1 (weight 2); the ideal list's first 3 ranks: 2, 1, 1
    assert v[("1", "infNDCG@3")] == pytest.approx(
        (2 + 2 / L2(3)) / (2 + 1 / L2(3) + 1 / L2(4)), abs=1e-12)


def test_query_1_matches_nist_sample_eval_to_its_printed_precision(inclusion):
    # `sample_eval.pl -q` on PRELS's query 1 and its run prints infAP 0.8850 and infNDCG
    # 1.0040; there the drawn share of the tail above each relevant chunk equals pi, so
    # its counted estimate and relgrade's 1/pi one coincide
    v = _values(["xinfAP", "infNDCG"], inclusion)
    assert f"{v[('1', 'xinfAP')]:6.4f}" == "0.8850"
    assert f"{v[('1', 'infNDCG')]:6.4f}" == "1.0040"


def test_the_fifth_field_form_and_the_sixth_field_form_give_the_same_probabilities(tmp_path):
    five = tmp_path / "five.prels"
    five.write_text(PRELS)
    six = tmp_path / "six.prels"
    six.write_text("".join(line + (" 1" if line.split()[3] == "1" else " 0.5") + "\n"
                           for line in PRELS.splitlines()))
    a, b = read_trec_inclusion(five), read_trec_inclusion(six)
    pd.testing.assert_frame_equal(a, b)
    assert a["inclusion_prob"].tolist() == [1.0] * 4 + [0.5] * 4 + [1.0] + [0.5] * 6
    assert _values(["xinfAP"], a) == _values(["xinfAP"], b)


def _random_case(rng, n_queries=8):
    rows_q, rows_r = [], []
    for qi in range(n_queries):
        chunks = [f"c{j}" for j in range(12)]
        for c in rng.choice(chunks, size=rng.integers(2, 10), replace=False):
            rows_q.append((f"q{qi}", c, int(rng.integers(-1, 4))))
        for c in rng.choice(chunks + ["u1", "u2"], size=rng.integers(1, 14), replace=False):
            rows_r.append((f"q{qi}", c, 0, float(rng.integers(0, 5))))
    q = pd.DataFrame(rows_q, columns=["query_id", "chunk_id", "grade"])
    r = pd.DataFrame(rows_r, columns=["query_id", "chunk_id", "rank", "score"])
    r["rank"] = r.groupby("query_id").cumcount() + 1
    return q, r


@pytest.mark.parametrize("seed", range(4))
def test_with_every_probability_1_xinfap_is_ap_and_infndcg_is_ndcg(seed):
    q, r = _random_case(np.random.default_rng(seed))
    ones = q[["query_id", "chunk_id"]].assign(inclusion_prob=1.0)
    pairs = [("xinfAP", "AP"), ("xinfAP@5", "AP@5"), ("xinfAP(rel=2)", "AP(rel=2)"),
             ("infNDCG", "nDCG"), ("infNDCG@5", "nDCG@5"),
             ("infNDCG(dcg='exp-log2')@3", "nDCG(dcg='exp-log2')@3")]
    pq = per_query(qrels=q, run=r, measures=[m for p in pairs for m in p], inclusion=ones)
    for inferred, full in pairs:
        a = pq[pq["measure"] == str(parse_measure(inferred))].set_index("query_id")["value"]
        b = pq[pq["measure"] == str(parse_measure(full))].set_index("query_id")["value"]
        pd.testing.assert_series_equal(a, b, check_names=False, rtol=0, atol=1e-12)


# --- unbiasedness ----------------------------------------------------------------------

TOP = {"h0": 2, "h1": 0, "h2": 1, "h3": 0}
TAIL = {"t0": 1, "t1": 0, "t2": 2, "t3": 0, "t4": 1, "t5": 0, "t6": 1, "t7": 0}
ORDER = ["t0", "h0", "x1", "t1", "h1", "t2", "t3", "h2", "x2", "t4", "t5", "h3", "t6", "t7"]


def _samples(draws):
    """One query per drawn tail subset: the top stratum judged whole, k tail chunks drawn."""
    qrels, inclusion, run = [], [], []
    pi = len(draws[0]) / len(TAIL)
    for i, drawn in enumerate(draws):
        qid = f"s{i}"
        graded = {**TOP, **{c: TAIL[c] for c in drawn}}
        qrels += [(qid, c, g) for c, g in graded.items()]
        inclusion += [(qid, c, 1.0 if c in TOP else pi) for c in graded]
        run += [(qid, c, r + 1, 100.0 - r) for r, c in enumerate(ORDER)]
    return (pd.DataFrame(qrels, columns=["query_id", "chunk_id", "grade"]),
            pd.DataFrame(inclusion, columns=["query_id", "chunk_id", "inclusion_prob"]),
            pd.DataFrame(run, columns=["query_id", "chunk_id", "rank", "score"]))


def _full(measures):
    qrels = pd.DataFrame([("full", c, g) for c, g in {**TOP, **TAIL}.items()],
                         columns=["query_id", "chunk_id", "grade"])
    run = pd.DataFrame([("full", c, r + 1, 100.0 - r) for r, c in enumerate(ORDER)],
                       columns=["query_id", "chunk_id", "rank", "score"])
    return per_query(qrels=qrels, run=run, measures=measures).set_index("measure")["value"]


def test_over_every_possible_tail_sample_the_estimates_average_to_the_full_values():
    # all C(8, 4) = 70 draws of 4 tail chunks, each equally likely: the expectation exactly.
    # xinfAP's numerator (sum of inferred precisions / pi) and R^ are unbiased, and so is
    # infNDCG's DCG; the ratios are not quite, so they are checked through their parts.
    draws = list(itertools.combinations(TAIL, 4))
    qrels, inclusion, run = _samples(draws)
    pq = per_query(qrels=qrels, run=run, measures=["xinfAP", "infNDCG@10"],
                   inclusion=inclusion)
    judged = qrels.merge(inclusion, on=["query_id", "chunk_id"])
    r_hat = (1 / judged["inclusion_prob"]).where(judged["grade"] >= 1, 0.0).groupby(
        judged["query_id"]).sum()
    xinfap = pq[pq["measure"] == "xinfAP"].set_index("query_id")["value"]
    full = _full(["AP", "nDCG@10"])
    n_rel = sum(g >= 1 for g in {**TOP, **TAIL}.values())
    assert r_hat.mean() == pytest.approx(n_rel, abs=1e-12)
    assert (xinfap * r_hat[xinfap.index]).mean() == pytest.approx(full["AP"] * n_rel, abs=1e-12)
    # infNDCG@10 = DCG^ / IDCG^: DCG^ (sum of gain / (pi log2(rank + 1))) is unbiased; IDCG^
    # is the DCG of each positive grade's estimated count (2 per drawn chunk), rounded
    infndcg = pq[pq["measure"] == "infNDCG@10"].set_index("query_id")["value"]
    ideal = []
    for drawn in draws:
        grades = sorted([g for g in TOP.values() if g > 0]
                        + [TAIL[c] for c in drawn if TAIL[c] > 0] * 2, reverse=True)
        ideal.append(sum(g / L2(r + 2) for r, g in enumerate(grades[:10])))
    dcg = infndcg[[f"s{i}" for i in range(len(draws))]].to_numpy() * np.array(ideal)
    full_ideal = sum(g / L2(r + 2) for r, g in enumerate(
        sorted([g for g in {**TOP, **TAIL}.values() if g > 0], reverse=True)[:10]))
    assert dcg.mean() == pytest.approx(full["nDCG@10"] * full_ideal, abs=1e-12)


def test_averaged_over_seeded_samples_the_estimates_are_near_the_full_values():
    # 400 seeded draws of 5 of the 8 tail chunks (pi = 5/8): the means land within a few
    # standard errors of AP and nDCG (the ratio of two unbiased estimates carries a small
    # bias of order 1/k, well under the tolerance here)
    rng = np.random.default_rng(20260)
    draws = [tuple(rng.choice(list(TAIL), size=5, replace=False)) for _ in range(400)]
    qrels, inclusion, run = _samples(draws)
    pq = per_query(qrels=qrels, run=run, measures=["xinfAP", "infNDCG"], inclusion=inclusion)
    full = _full(["AP", "nDCG"])
    for inferred, exact in (("xinfAP", "AP"), ("infNDCG", "nDCG")):
        values = pq.loc[pq["measure"] == inferred, "value"]
        se = values.std() / math.sqrt(len(values))
        assert abs(values.mean() - full[exact]) < max(4 * se, 0.01), inferred


# --- bad input ---------------------------------------------------------------------------

@pytest.mark.parametrize("line, message", [
    ("1 0 a 1 1 0", "pool.prels:2: query 1, docid a: an inclusion probability must be in "
                    "(0, 1] (found 0)"),
    ("1 0 a 1 1 1.5", "pool.prels:2: query 1, docid a: an inclusion probability must be in "
                      "(0, 1] (found 1.5)"),
    ("1 0 a 1 1 -0.2", "(0, 1] (found -0.2)"),
    ("1 0 a 1 1 nan", "(0, 1] (found nan)"),
    ("1 0 a 1 1 half", "pool.prels:2: query 1, docid a: an inclusion probability must be a "
                       "number (found 'half')"),
    ("1 0 a 1 x 0.5", "pool.prels:2: rel must be an integer (found 'x')"),
    ("1 0 a 1 1", "pool.prels:2: expected 6 whitespace-separated fields"),
    ("1 0 z 1 1 0.5 7", "pool.prels:2: expected 6 whitespace-separated fields"),
    ("1 0 b 1 0 0.5", "pool.prels:2: query 1, docid b: one (query, docid) pair is listed "
                      "twice (found lines 1 and 2)"),
])
def test_a_bad_inclusion_line_is_refused_naming_file_line_and_value(tmp_path, line, message):
    path = tmp_path / "pool.prels"
    path.write_text("1 0 b 1 0 1\n" + line + "\n")
    with pytest.raises(InputError) as err:
        read_trec_inclusion(path)
    assert message in str(err.value)


def test_an_empty_inclusion_file_and_a_stratum_with_nothing_judged_are_refused(tmp_path):
    path = tmp_path / "pool.prels"
    path.write_text("\n")
    with pytest.raises(InputError, match="pool.prels: no line"):
        read_trec_inclusion(path)
    path.write_text("1 0 a 1 1\n1 0 b 2 -1\n")
    with pytest.raises(InputError, match="pool.prels:2: query 1, stratum 2: a stratum has "
                                         "no judged line"):
        read_trec_inclusion(path)


def test_a_parquet_pool_table_is_read_and_its_probabilities_checked(tmp_path):
    path = tmp_path / "pool.parquet"
    pd.DataFrame({"query_id": ["1", "1"], "chunk_id": ["a", "b"],
                  "inclusion_prob": [1.0, 0.25]}).to_parquet(path)
    assert read_inclusion(path)["inclusion_prob"].tolist() == [1.0, 0.25]
    pd.DataFrame({"query_id": ["1", "1"], "chunk_id": ["a", "b"],
                  "inclusion_prob": [1.0, 0.0]}).to_parquet(path)
    with pytest.raises(InputError, match=r"pool.parquet: row 2, query 1, chunk b: an inclusion "
                                         r"probability must be in \(0, 1\] \(found 0.0\)"):
        read_inclusion(path)


def test_the_library_refuses_missing_and_bad_probabilities(inclusion):
    with pytest.raises(InputError, match="xinfAP needs the judged pairs' inclusion "
                                         "probabilities"):
        per_query(qrels=QRELS, run=RUN, measures=["nDCG@5", "xinfAP"])
    with pytest.raises(InputError, match="query 2, chunk u3: a judged pair has no inclusion "
                                         "probability"):
        per_query(qrels=QRELS, run=RUN, measures=["infNDCG"],
                  inclusion=inclusion[inclusion["chunk_id"] != "u3"])
    bad = inclusion.assign(inclusion_prob=inclusion["inclusion_prob"].where(
        inclusion["chunk_id"] != "c", 2.0))
    with pytest.raises(InputError, match=r"query 1, chunk c: an inclusion probability must "
                                         r"be in \(0, 1\] \(found 2.0\)"):
        per_query(qrels=QRELS, run=RUN, measures=["xinfAP"], inclusion=bad)
    twice = pd.concat([inclusion, inclusion.iloc[[0]]])
    with pytest.raises(InputError, match="query 1, chunk a: a pair has two inclusion "
                                         "probabilities"):
        inclusion_at(index_qrels(QRELS), twice)


def test_evaluate_inclusion_adds_the_inferred_measures_and_refuses_a_bad_file(tmp_path):
    (tmp_path / "key.qrels").write_text(
        "".join(f"{q} 0 {c} {g}\n" for q, c, g in QRELS.itertuples(index=False)))
    (tmp_path / "run.trec").write_text(
        "".join(f"{q} Q0 {c} {r} {s} t\n" for q, c, r, s in RUN.itertuples(index=False)))
    (tmp_path / "pool.prels").write_text(PRELS)
    args = ["evaluate", str(tmp_path / "key.qrels"), str(tmp_path / "run.trec")]
    res = CliRunner().invoke(main, args + ["--inclusion", str(tmp_path / "pool.prels"),
                                           "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["measures"][-2:] == ["xinfAP", "infNDCG"]
    assert doc["runs"]["run"]["xinfAP"] == pytest.approx((Q1_XINFAP + Q2_XINFAP) / 2,
                                                          abs=1e-12)
    res = CliRunner().invoke(main, args + ["-m", "infNDCG"])
    assert res.exit_code == 1
    assert "Error: infNDCG needs the judged pairs' inclusion probabilities" in res.output
    (tmp_path / "pool.prels").write_text(PRELS.replace("1 0 a 1 2", "1 0 a 1 2 1"))
    res = CliRunner().invoke(main, args + ["--inclusion", str(tmp_path / "pool.prels")])
    assert res.exit_code == 1
    assert "pool.prels:2: expected 6 whitespace-separated fields" in res.output
    assert "xinfAP" not in res.output  # no partial table
    # a given inclusion file is checked even when no inferred measure is asked for
    res = CliRunner().invoke(main, args + ["--inclusion", str(tmp_path / "pool.prels"),
                                           "-m", "AP"])
    assert res.exit_code == 1
    assert "pool.prels:2: expected 6 whitespace-separated fields" in res.output
