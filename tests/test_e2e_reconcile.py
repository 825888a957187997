"""End to end, in a copy of what a clone holds of the repository's default experiment (`dvc
repro metrics` rebuilds its per-query values from the committed grades): `relgrade reconcile`
against synthetic A/B results, its explanation checked against the per-query values by hand."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps

from tests.e2e import tiny

pytestmark = [pytest.mark.slow]

NDCG = "nDCG(dcg='exp-log2')@{}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory, default_audited):
    # the default experiment's tracked files in a new git repository, its runs, pool and
    # audit made (tests/conftest.py, shared with the disputes module); `dvc repro metrics`
    # does the rest: the packets, the grades, agreement, gate, key and every arm's metrics
    root = tiny.copy_repo(default_audited / "repo", tmp_path_factory.mktemp("reconcile"))
    tiny.run(root, "dvc", "repro", "metrics")
    return root


def _values(root, arm, k):
    pq = pd.read_parquet(root / "data/metrics" / f"{arm}.parquet")
    return pq[pq["measure"] == NDCG.format(k)].set_index("query_id")["value"].sort_index()


def _t_interval(d):
    """The paired difference's mean and 95% Student t interval, by hand."""
    n = len(d)
    half = sps.t.ppf(0.975, n - 1) * np.std(d, ddof=1) / math.sqrt(n)
    return float(np.mean(d)), float(np.mean(d) - half), float(np.mean(d) + half)


def _write_ab(root, name, control, treatment, delta, low, high, segments=()):
    rows = [{"control": control, "treatment": treatment, "metric": "CTR", "delta": delta,
             "low": low, "high": high}]
    rows += [{"control": control, "treatment": treatment, "metric": "CTR", "segment": s,
              "delta": d, "low": lo, "high": hi} for s, d, lo, hi in segments]
    path = root / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _reconcile(root, *args, check=True):
    return tiny.run(root, "relgrade", "reconcile", "--experiment", ".", *args, check=check)


def test_an_online_no_change_against_an_offline_loss_at_10_is_the_cutoff(clone):
    # offline by hand: tfidf - bm25 excludes 0 at @10, holds 0 at @3
    d10 = _values(clone, "tfidf", 10) - _values(clone, "bm25", 10)
    d3 = _values(clone, "tfidf", 3) - _values(clone, "bm25", 3)
    mean10, low10, high10 = _t_interval(d10)
    _, low3, high3 = _t_interval(d3)
    assert high10 < 0 and low3 < 0 < high3
    bm25 = float(_values(clone, "bm25", 10).mean())
    assert not low10 <= 0.002 * bm25 <= high10   # the online +0.2% lies outside: not power
    ab = _write_ab(clone, "ab-cutoff.jsonl", "bm25", "tfidf", 0.002, -0.006, 0.010)
    out = _reconcile(clone, "--ab", ab.name)
    result = json.loads((clone / "metrics/reconcile.json").read_text())
    assert result["offline"]["delta"] == pytest.approx(mean10, abs=1e-12)
    assert result["offline"]["verdict"] == "worse" and result["online"]["verdict"] == "no change"
    assert result["contradiction"] is True
    assert [c["check"] for c in result["conclusion"]] == ["cutoff"]
    assert NDCG.format(3) in result["checks"]["cutoff"]["agreeing"]
    assert "1. cutoff" in out.stdout
    assert (clone / "metrics/reconcile.md").read_text() == out.stdout


def test_an_online_gain_inside_the_offline_interval_is_power(clone):
    d10 = _values(clone, "hybrid", 10) - _values(clone, "bm25", 10)
    mean, low, high = _t_interval(d10)
    bm25 = float(_values(clone, "bm25", 10).mean())
    implied = 0.024 * bm25
    assert low < implied < high and low < 0 < high   # offline cannot tell +2.4% from 0
    for k in (3, 5):   # nor does any shallower cutoff say better
        _, lo, hi = _t_interval(_values(clone, "hybrid", k) - _values(clone, "bm25", k))
        assert lo < 0 < hi
    ab = _write_ab(clone, "ab-power.jsonl", "bm25", "hybrid", 0.024, 0.011, 0.037)
    _reconcile(clone, "--ab", ab.name)
    result = json.loads((clone / "metrics/reconcile.json").read_text())
    assert [c["check"] for c in result["conclusion"]] == ["power"]
    power = result["checks"]["power"]
    assert power["implied"] == pytest.approx(implied)
    se = result["offline"]["se"]
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert power["n_needed"] == math.ceil(36 * (z * se / implied) ** 2 - 1e-9)
    # the hand t interval's standard error gives the same order of queries needed
    se_t = float(np.std(d10, ddof=1) / math.sqrt(36))
    assert power["n_needed"] == pytest.approx(36 * (z * se_t / implied) ** 2, rel=0.2)


def test_online_segments_that_pull_apart_are_named(clone):
    ab = _write_ab(clone, "ab-segments.jsonl", "bm25", "hybrid", 0.0, -0.01, 0.01,
                   segments=[("keyword", 0.03, 0.01, 0.05), ("question", -0.03, -0.05, -0.01)])
    _reconcile(clone, "--ab", ab.name)
    result = json.loads((clone / "metrics/reconcile.json").read_text())
    seg = result["checks"]["segments"]
    assert seg["online_cancels"] and seg["supported"]
    assert "segments" in [c["check"] for c in result["conclusion"]]


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_one_arms_finds_unjudged_rank_pool_bias_first(clone, tmp_path):
    # The worked example's shape: the key holds only bm25's top 10 (the pool one ranker
    # built), so tfidf's own finds are unjudged; its metrics are recomputed on that key.
    root = tiny.copy_repo(clone, tmp_path / "pooled-by-bm25")
    top = set()
    for line in (root / "data/runs/bm25.trec").read_text().splitlines():
        q, _, c, rank, _, _ = line.split()
        if int(rank) <= 10:
            top.add((q, c))
    key = [line for line in (root / "data/key/key.jsonl").read_text().splitlines(True)
           if (json.loads(line)["query_id"], json.loads(line)["chunk_id"]) in top]
    qrels = [line for line in (root / "data/key/key.qrels").read_text().splitlines(True)
             if (line.split()[0], line.split()[2]) in top]
    (root / "data/key/key.jsonl").write_text("".join(key))
    (root / "data/key/key.qrels").write_text("".join(qrels))
    record = json.loads((root / "data/key/record.json").read_text())
    record.update(key_sha256=_sha(root / "data/key/key.jsonl"),
                  qrels_sha256=_sha(root / "data/key/key.qrels"), post_hoc=True)
    (root / "data/key/record.json").write_text(json.dumps(record, indent=2) + "\n")
    prov = pd.read_parquet(root / "data/private/provenance.parquet")
    prov[prov["arm"] == "bm25"].to_parquet(root / "data/private/provenance.parquet", index=False)
    for arm in ("bm25", "hybrid", "tfidf"):
        tiny.run(root, "python", "stages/metrics.py", arm)
    # by hand: the share of tfidf's top 10 the key grades
    tf = pd.read_csv(root / "data/runs/tfidf.trec", sep=" ", header=None,
                     names=["q", "x", "c", "rank", "score", "run"], dtype={"q": str, "c": str})
    tf = tf[tf["rank"] <= 10]
    tf = tf.assign(graded=[(q, c) in top for q, c in zip(tf["q"], tf["c"])])
    judged = tf.groupby("q")["graded"].mean()
    ab = _write_ab(root, "ab.jsonl", "bm25", "tfidf", 0.024, 0.011, 0.037)
    _reconcile(root, "--ab", ab.name)
    result = json.loads((root / "metrics/reconcile.json").read_text())
    pool = result["checks"]["pool_bias"]
    assert pool["judged"]["bm25"] == 1.0
    assert pool["judged"]["tfidf"] == pytest.approx(float(judged.mean()))
    assert pool["disfavoured"] == "tfidf" and pool["supported"]
    assert result["conclusion"][0]["check"] == "pool_bias"
    assert pool["condensed_delta"] > pool["standard_delta"]


@pytest.mark.parametrize("lines, log, message", [
    (['{"control": "bm25", "treatment": "semantic", "metric": "CTR", "delta": 0.02, '
      '"low": 0.01, "high": 0.03}'], None,
     "Error: bad.jsonl:1: semantic: treatment is not an arm of the experiment. "
     "Arms: bm25, bm25f, hybrid, tfidf"),
    (['{"control": "bm25", "treatment": "hybrid", "metric": "CTR", "delta": 0.02, '
      '"low": 0.01, "high": 0.03}', '{"control": "bm25",'], None,
     "Error: bad.jsonl:2: not valid JSON: expecting property name enclosed in double quotes "
     "at column 20"),
    (['{"control": "bm25", "treatment": "hybrid", "metric": "CTR", "delta": 0.02, '
      '"low": 0.01, "high": 0.03}'], "",
     "Error: log.txt: the query log holds no queries. Give a log with at least one issued "
     "query"),
])
def test_bad_input_gets_one_error_line_and_nothing_is_written(clone, lines, log, message):
    for name in ("reconcile.json", "reconcile.md"):
        (clone / "metrics" / name).unlink(missing_ok=True)
    (clone / "bad.jsonl").write_text("".join(line + "\n" for line in lines))
    args = ["--ab", "bad.jsonl"]
    if log is not None:
        (clone / "log.txt").write_text(log)
        args += ["--query-log", "log.txt"]
    out = _reconcile(clone, *args, check=False)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [message]
    assert out.stdout == ""
    assert not (clone / "metrics/reconcile.json").exists()
    assert not (clone / "metrics/reconcile.md").exists()


def test_a_log_that_lost_most_evaluated_queries_is_drift(clone):
    queries = pd.read_csv(clone / "data/input/queries.tsv", sep="\t", dtype=str)
    kept = queries["query"].iloc[:5].tolist()
    (clone / "log.tsv").write_text("query\tcount\n" + "".join(
        f"{q}\t{n}\n" for q, n in zip(kept + ["a query nobody graded"], [50, 20, 10, 5, 5, 10])))
    ab = _write_ab(clone, "ab-drift.jsonl", "bm25", "tfidf", 0.002, -0.006, 0.010)
    _reconcile(clone, "--ab", ab.name, "--query-log", "log.tsv")
    drift = json.loads((clone / "metrics/reconcile.json").read_text())["checks"]["drift"]
    assert drift["absent_share"] == pytest.approx(31 / 36) and drift["supported"]
    assert drift["covered_traffic"] == pytest.approx(90 / 100)
    d = _values(clone, "tfidf", 10) - _values(clone, "bm25", 10)
    assert drift["delta_present"] == pytest.approx(float(d.loc[queries["query_id"][:5]].mean()))


def test_segments_from_a_table_place_the_queries_of_the_ab_segments(clone):
    ids = sorted(_values(clone, "bm25", 10).index)
    (clone / "segments.tsv").write_text("query_id\tsegment\n" + "".join(
        f"{q}\t{'first' if i < 12 else 'rest'}\n" for i, q in enumerate(ids)))
    ab = _write_ab(clone, "ab-seg.jsonl", "bm25", "hybrid", 0.0, -0.01, 0.01,
                   segments=[("first", 0.01, -0.01, 0.03), ("rest", -0.01, -0.03, 0.01)])
    _reconcile(clone, "--ab", ab.name, "--segments", "segments.tsv")
    seg = json.loads((clone / "metrics/reconcile.json").read_text())["checks"]["segments"]
    assert [(g["group"], g["n"]) for g in seg["offline"]] == [("first", 12), ("rest", 24)]
    d = _values(clone, "hybrid", 10) - _values(clone, "bm25", 10)
    assert seg["offline"][0]["delta"] == pytest.approx(float(d.loc[ids[:12]].mean()))
    # a segment the table does not know is refused, naming the A/B file's line
    bad = _write_ab(clone, "ab-unknown.jsonl", "bm25", "hybrid", 0.0, -0.01, 0.01,
                    segments=[("mobile", 0.01, -0.01, 0.03)])
    out = _reconcile(clone, "--ab", bad.name, "--segments", "segments.tsv", check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == ("Error: ab-unknown.jsonl:2: mobile: segment has no queries in "
                                  "the experiment. Segments: first, rest (or place the "
                                  "queries with --segments FILE)")
