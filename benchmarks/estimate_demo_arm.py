"""Pre-registered choice of the default experiment's demonstration arm (DESIGN.md, "Arms").

Made before any new pair was graded, from the frozen key alone. For each candidate arm, over
the experiment's chunks and queries (``dvc repro corpus queries`` first):

- ``new``: its top-10 pairs the key has not graded (what pooling it at depth 10 costs);
- bounds: ``relgrade compare --qrels`` of bm25, tfidf, hybrid and the candidate (baseline
  bm25, the 9 measures of params ``metrics``, Holm over the 27 comparisons, seed 20261130),
  with every new pair counted grade 0, grade 1 and grade 2;
- ``P(sig)``: the share of 300 draws in which the candidate's nDCG@10 difference from bm25
  is significant at 0.05/27 (paired t test; Holm's first step, so conservative), each new
  pair's grade drawn from the key's grades of the pairs the candidate ranks at the same rank.

Run from the repository's top: ``python benchmarks/estimate_demo_arm.py OUT_DIR``; it prints a
Markdown table.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from relgrade.retrieve import chunk_texts, run_arm, search
from relgrade.retrieve.bm25 import BM25Scorer
from relgrade.retrieve.bm25f import BM25FScorer
from relgrade.retrieve.tokenize import tokenize

PRIMARY = "nDCG(dcg='exp-log2')@10"
MEASURES = [f"{m}@{k}" for k in (3, 5, 10) for m in ("nDCG(dcg='exp-log2')", "R", "RR")]


class PlainBM25:
    """BM25 (Lucene) over lowercase \\w+ words: no identifier split, no stopwords."""

    def __init__(self, docs):
        import bm25s

        self._index = bm25s.BM25(method="lucene", dtype="float64")
        self._index.index([self.tok(d) for d in docs], show_progress=False)
        self.n = len(docs)

    @staticmethod
    def tok(text):
        return [w.lower() for w in re.findall(r"\w+", text)]

    def scores(self, query):
        ids = self._index.get_tokens_ids(list(dict.fromkeys(self.tok(query))))
        return (np.asarray(self._index.get_scores(ids), dtype=np.float64) if ids
                else np.zeros(self.n))


class Dirichlet:
    """Query likelihood with Dirichlet smoothing (Zhai & Lafferty 2004), rank-equivalent
    form Σ_t ln(1 + tf/(μ p(t|C))) + |q| ln(μ/(|d|+μ)), shifted > 0 on chunks matching a term."""

    def __init__(self, docs, mu):
        from sklearn.feature_extraction.text import CountVectorizer

        self.v = CountVectorizer(tokenizer=tokenize, lowercase=False, token_pattern=None)
        self.X = self.v.fit_transform(docs).tocsc().astype(np.float64)
        self.dl = np.asarray(self.X.sum(1)).ravel()
        cf = np.asarray(self.X.sum(0)).ravel()
        self.p, self.mu = cf / cf.sum(), mu

    def scores(self, query):
        voc = self.v.vocabulary_
        terms = [t for t in tokenize(query) if t in voc]
        s = np.zeros(self.X.shape[0])
        if not terms:
            return s
        match = np.zeros(len(s), bool)
        for t in terms:
            tf = self.X[:, voc[t]].toarray().ravel()
            s += np.log(1 + tf / (self.mu * self.p[voc[t]]))
            match |= tf > 0
        s += len(terms) * np.log(self.mu / (self.dl + self.mu))
        return np.where(match, s - s.min() + 1.0, 0.0)


def ndcg10(run, grades, qids):
    out = []
    for q in qids:
        top = run.get(q, [])[:10]
        g = grades.get(q, {})
        dcg = sum((2 ** g.get(c, 0) - 1) / np.log2(i + 2) for i, c in enumerate(top))
        ideal = sorted(g.values(), reverse=True)[:10]
        idcg = sum((2 ** x - 1) / np.log2(i + 2) for i, x in enumerate(ideal))
        out.append(dcg / idcg if idcg > 0 else 0.0)
    return np.array(out)


def main(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    chunks = pd.read_parquet("data/corpus/chunks.parquet")
    queries = pd.read_parquet("data/queries/queries.parquet")
    arms = yaml.safe_load(open("params.yaml", encoding="utf-8"))["arms"]
    key = pd.read_json("data/key/key.jsonl", lines=True,
                       dtype={"query_id": str, "chunk_id": str})
    key_g = {(q, c): int(g) for q, c, g in zip(key.query_id, key.chunk_id, key.grade)}
    qids = queries.query_id.astype(str).tolist()
    docs = chunk_texts(chunks)
    heads = chunks.header.astype(str).tolist()
    texts = chunks.text.astype(str).tolist()
    avgdl = float(np.mean([len(tokenize(d)) for d in docs]))
    cands = {f"bm25f header_weight={w}": (lambda w=w: BM25FScorer(heads, texts, header_weight=w))
             for w in (2, 3, 5, 8, 12, 16)}
    cands |= {
        "bm25 header only": lambda: BM25Scorer(heads),
        "bm25 text only": lambda: BM25Scorer(texts),
        "bm25 plain words": lambda: PlainBM25(docs),
        "bm25 b=0": lambda: BM25Scorer(docs, b=0.0),
        "bm25 b=1": lambda: BM25Scorer(docs, b=1.0),
        "bm25 k1=0.3": lambda: BM25Scorer(docs, k1=0.3),
        "bm25 k1=3": lambda: BM25Scorer(docs, k1=3.0),
        "QL Dirichlet mu=avgdl": lambda: Dirichlet(docs, avgdl),
        "QL Dirichlet mu=2000": lambda: Dirichlet(docs, 2000.0),
    }
    runs = {a: run_arm(a, arms, chunks=chunks, queries=queries) for a in arms}
    for name, make in cands.items():
        runs[name] = search(make(), chunks=chunks, queries=queries, depth=100)
    files = {}
    for i, (name, run) in enumerate(runs.items()):
        files[name] = out / f"run{i}.trec"
        with open(files[name], "w", encoding="utf-8") as f:
            for r in run.itertuples():
                f.write(f"{r.query_id} Q0 {r.chunk_id} {r.rank} {r.score!r} r{i}\n")
    rng = np.random.default_rng(20261130)
    lists = {a: {q: g.sort_values("rank").chunk_id.tolist() for q, g in r.groupby("query_id")}
             for a, r in runs.items()}
    print("| candidate | new pairs | queries | Δ nDCG@10, new = 0 (p Holm) | new = 1 | new = 2 "
          "| P(sig) |")
    print("|---|---|---|---|---|---|---|")
    for name in cands:
        top = runs[name][runs[name]["rank"] <= 10]
        rank = {(q, c): int(r) for q, c, r in zip(top.query_id, top.chunk_id, top["rank"])}
        new = [(q, c) for (q, c) in rank if (q, c) not in key_g]
        cells = []
        for g in (0, 1, 2):
            qrels = out / "qrels.txt"
            with open(qrels, "w", encoding="utf-8") as f:
                for (q, c), x in key_g.items():
                    f.write(f"{q} 0 {c} {x}\n")
                for q, c in new:
                    f.write(f"{q} 0 {c} {g}\n")
            cmd = ["relgrade", "compare", "--qrels", str(qrels), "--json", "--seed", "20261130"]
            for m in MEASURES:
                cmd += ["-m", m]
            cmd += [str(files[a]) for a in ("bm25", "tfidf", "hybrid", name)]
            res = json.loads(subprocess.run(cmd, capture_output=True, text=True,
                                            check=True).stdout)
            label = files[name].stem
            c = next(x for x in res["comparisons"]
                     if x["arm_a"] == label and x["measure"] == PRIMARY)
            cells.append(f"{c['delta']:+.3f} ({c['p_holm']:.2g})")
        by_rank = {}
        for (q, c), r in rank.items():
            if (q, c) in key_g:
                by_rank.setdefault(r, []).append(key_g[(q, c)])
        every = [x for v in by_rank.values() for x in v]
        base = {q: {c: x for (qq, c), x in key_g.items() if qq == q} for q in qids}
        sig = 0
        for _ in range(300):
            grades = {q: dict(v) for q, v in base.items()}
            for q, c in new:
                grades.setdefault(q, {})[c] = int(rng.choice(by_rank.get(rank[(q, c)]) or every))
            d = ndcg10(lists[name], grades, qids) - ndcg10(lists["bm25"], grades, qids)
            sig += stats.ttest_1samp(d, 0.0).pvalue * 27 < 0.05
        print(f"| {name} | {len(new)} | {len({q for q, _ in new})} | {' | '.join(cells)} "
              f"| {sig / 300:.2f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
