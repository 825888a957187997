"""The publish stage at scale: peak memory and CPU-seconds, before and after it streamed.

    python benchmarks/bench_publish.py --queries 36000 100000 --base REV
        # writes benchmarks/out/publish.json and prints the table of benchmarks/README.md

For each size N the publish stage's inputs are written as the scale benchmark's experiment
has them (bench_scale.py: N queries, half keyword and half question, 10·N chunks with the same
texts, queries "find function i", intents "Where is function i defined?"), with a frozen key
of 40 pairs per query (each query's first 40 candidates of the scale generator's scheme: a
seeded start, steps of 7), grades 2/1/0 as that generator gives them, the key grader's grade
rows for every key pair and the auditor's for 10% of the queries (reason "synthetic grade
for the scale benchmark"), the key's qrels and record with their sha256, and three arms'
metrics files on that key.

The stage runs as DVC runs it (``python stages/publish.py`` in the experiment's folder), once
with relgrade's code at revision ``--base`` (exported with ``git archive``) and once with the
working tree's, paired and interleaved (A B, B A, A B, ...); each run is timed as a whole
process: CPU-seconds (user + sys, from ``os.wait4``), wall seconds, peak RSS. The two
bundles must be byte-identical (checked after every run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import REPO, measured  # noqa: E402

POOL = 40
ARMS = ("alpha", "beta", "gamma")


def write_experiment(root: Path, n: int, seed: int) -> None:
    """The publish stage's inputs for N queries under ``root`` (see the module's notes)."""
    rng = np.random.default_rng(seed)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    p = params["paths"]
    for name in ("chunks", "queries", "intents", "grades", "key", "metrics"):
        path = root / p[name]
        (path if name == "metrics" else path.parent).mkdir(parents=True, exist_ok=True)
    n_chunks = 10 * n
    cids = np.char.add("c", np.char.zfill(np.arange(n_chunks).astype(str), 7))
    qids = np.char.add("q", np.char.zfill(np.arange(n).astype(str), 6))
    i = np.arange(n_chunks)
    pd.DataFrame({
        "chunk_id": cids,
        "header": [f"src/m{k % 97}.py \u203a def f{k}" for k in i],
        "text": [f"def f{k}():\n    return {k} # chunk {c} of the synthetic corpus"
                 for k, c in zip(i, cids)],
        "source": [f"src/m{k % 97}.py" for k in i],
    }).to_parquet(root / p["chunks"], index=False)
    pd.DataFrame({"query_id": qids, "query": [f"find function {k}" for k in range(n)],
                  "group": np.where(np.arange(n) % 2 == 0, "keyword", "question")}
                 ).to_parquet(root / p["queries"], index=False)
    pd.DataFrame({"query_id": qids, "query": [f"find function {k}" for k in range(n)],
                  "intent": [f"Where is function {k} defined?" for k in range(n)]}
                 ).to_parquet(root / p["intents"], index=False)
    start = rng.integers(0, n_chunks, size=n)
    cand = (start[:, None] + 7 * np.arange(POOL)[None, :]) % n_chunks
    grade = np.zeros(POOL, dtype=np.int64)
    grade[:3], grade[3:8] = 2, 1
    key = pd.DataFrame({"query_id": np.repeat(qids, POOL), "chunk_id": cids[cand.ravel()],
                        "grade": np.tile(grade, n)}).sort_values(["query_id", "chunk_id"])
    reason = "synthetic grade for the scale benchmark"
    audited = key[key["query_id"].isin(qids[::10])]
    grades = pd.concat([
        key.assign(grader="grader-a", role="grader"),
        audited.assign(grader="auditor-b", role="auditor"),
    ]).assign(round=1, reason=reason)
    grades[["query_id", "chunk_id", "grader", "role", "round", "grade", "reason"]].to_parquet(
        root / p["grades"], index=False)
    with open(root / p["key"], "w") as f:
        f.writelines(f'{{"query_id":"{q}","chunk_id":"{c}","grade":{g}}}\n'
                     for q, c, g in zip(key["query_id"], key["chunk_id"], key["grade"]))
    with open(root / p["qrels"], "w") as f:
        f.writelines(f"{q} 0 {c} {g}\n"
                     for q, c, g in zip(key["query_id"], key["chunk_id"], key["grade"]))
    sha = {name: hashlib.sha256((root / p[name]).read_bytes()).hexdigest()
           for name in ("key", "qrels")}
    (root / p["record"]).write_text(json.dumps({
        "key_sha256": sha["key"], "qrels_sha256": sha["qrels"], "pool_version": "p-bench",
        "rubric_version": "v1", "round": 1, "frozen_at": "2026-01-01T00:00:00+00:00",
        "dropped_queries": [], "post_hoc": False}, indent=2))
    for arm in ARMS:
        (root / p["metrics"] / f"{arm}.json").write_text(json.dumps({
            "arm": arm, "key_sha256": sha["key"], "pool_version": "p-bench", "post_hoc": False,
            "queries": n, "nDCG(dcg='exp-log2')@10": round(float(rng.random()), 4)}, indent=2))


def bundle_sha(root: Path) -> dict:
    out = root / "data" / "publish"
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(out.iterdir())}


def export(rev: str, dest: Path) -> Path:
    """relgrade's src/ and stages/ at revision ``rev`` under ``dest``."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev, "src", "stages"], cwd=REPO, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, nargs="+", default=[36000, 100000])
    ap.add_argument("--base", required=True, help="git revision of the code before")
    ap.add_argument("--pairs", type=int, default=3, help="paired runs per size")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "publish.json")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = {"before": export(args.base, tmp / "before"), "after": REPO}
        for n in args.queries:
            root = tmp / f"publish-{n}"
            root.mkdir()
            write_experiment(root, n, args.seed)
            runs = {"before": [], "after": []}
            for k in range(args.pairs):
                order = ("before", "after") if k % 2 == 0 else ("after", "before")
                shas = {}
                for which in order:
                    load = os.getloadavg()[0]
                    tree = trees[which]
                    m = measured([sys.executable, str(tree / "stages" / "publish.py")], root,
                                 src=tree / "src")
                    m["load_1min"] = load
                    runs[which].append(m)
                    shas[which] = bundle_sha(root)
                    print(n, which, {k2: round(v, 2) for k2, v in m.items()}, flush=True)
                if shas["before"] != shas["after"]:
                    raise SystemExit(f"bundles differ at {n} queries: {shas}")
            row = {"queries": n, "pairs": n * POOL}
            for which, rs in runs.items():
                row[which] = {f: statistics.median(r[f] for r in rs)
                              for f in ("cpu_s", "wall_s", "rss_mib", "load_1min")}
                row[which + "_runs"] = rs
            results.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print("| queries (key pairs) | before: CPU-s / wall s / peak RSS MiB | after | load (1 min) |")
    print("|---|---|---|---|")
    for r in results:
        b, a = r["before"], r["after"]
        print(f"| {r['queries']:,} ({r['pairs']:,}) | {b['cpu_s']:.1f} / {b['wall_s']:.0f} / "
              f"{b['rss_mib']:,.0f} | {a['cpu_s']:.1f} / {a['wall_s']:.0f} / "
              f"{a['rss_mib']:,.0f} | {b['load_1min']:.1f}–{a['load_1min']:.1f} |")


if __name__ == "__main__":
    main()
