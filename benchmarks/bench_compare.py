"""Paired comparisons against ranx, whole process, in interleaved rounds.

    python benchmarks/generate.py --seed 7 --only metrics
    python benchmarks/bench_compare.py --workload all-pairs --rounds 2
    python benchmarks/bench_compare.py --workload three-runs --rounds 3

Each contender runs as a fresh process (interpreter start, imports, reading, evaluation and
output included), one after the other in every round; its CPU seconds are the child's user +
system time from ``getrusage(RUSAGE_CHILDREN)``, its peak memory the child's own
``ru_maxrss``. The ratio column is the median over rounds of ranx's CPU seconds over
relgrade's in the same round; the load average is printed before every run.

Workloads (the ``metrics/`` data of ``generate.py``: 10 arms x 10,000 queries x depth 100):

* ``all-pairs``: every pair of the ten arms on ``nDCG(dcg='exp-log2')@10``, ``R@10`` and
  ``RR@10``. relgrade: ``relgrade compare --per-query FILE --all-pairs --json`` (135
  comparisons, each 10,000 bootstrap resamples and 10,000 sign flips, plus the 30 per-arm
  intervals of 10,000 resamples), on the per-query values written once to Parquet beforehand
  (scoring is not part of this row). ranx: ``ranx.compare`` of the ten runs with
  ``stat_test="fisher"``, 1,000 permutations (its evaluation of the ten runs included,
  ``make_comparable=True``), 90 ordered pairs x 3 measures. Per resample: relgrade draws
  135 x 20,000 resamples (the per-arm intervals counted as overhead), ranx 270 x 1,000.
* ``three-runs``: ``arm01``-``arm03`` from their TREC files against ``qrels.trec``, 1,000
  resamples. relgrade: ``relgrade compare --qrels qrels.trec A B C --all-pairs
  --bootstrap 1000 --permutations 1000 --json`` with the same three measures; ranx:
  ``Qrels.from_file``, ``Run.from_file`` x 3, ``compare`` with 1,000 Fisher permutations.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEASURES = ["nDCG(dcg='exp-log2')@10", "R@10", "RR@10"]
RANX = ["ndcg_burges@10", "recall@10", "mrr@10"]


def _ranx_worker(data: Path, workload: str) -> dict:
    import pandas as pd
    from ranx import Qrels, Run, compare

    if workload == "three-runs":
        qrels = Qrels.from_file(str(data / "qrels.trec"), kind="trec")
        runs = []
        for name in ("arm01", "arm02", "arm03"):
            run = Run.from_file(str(data / "runs" / f"{name}.trec"), kind="trec")
            run.name = name
            runs.append(run)
    else:
        ids = {"query_id": object, "chunk_id": object}
        qdf = pd.read_parquet(data / "qrels.parquet")
        qrels = Qrels.from_df(qdf.astype({**ids, "grade": int}), q_id_col="query_id",
                              doc_id_col="chunk_id", score_col="grade")
        runs = []
        for p in sorted((data / "runs").glob("*.parquet")):
            run = Run.from_df(pd.read_parquet(p).astype(ids), q_id_col="query_id",
                              doc_id_col="chunk_id", score_col="score")
            run.name = p.stem
            runs.append(run)
    report = compare(qrels, runs, metrics=RANX, stat_test="fisher", n_permutations=1000,
                     max_p=0.05, make_comparable=True)
    return {"means": {r.name: report.results[r.name] for r in runs}}


def _child(cmd: list[str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed: {proc.stderr.strip()[-2000:]}")
    peak = [float(x.split()[1]) for x in proc.stderr.splitlines() if x.startswith("PEAK_MIB ")]
    return {"wall": wall, "load_before": load, "stdout": proc.stdout,
            "peak_rss_mib": peak[-1] if peak else None,
            "cpu": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("benchmarks/data/metrics"))
    ap.add_argument("--workload", choices=["all-pairs", "three-runs"], default="three-runs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1, help="relgrade compare --workers")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker == "per-query":
        sys.path.insert(0, str(Path(__file__).parent))
        from bench_stats import per_query_from_workload

        pq, _, _, _ = per_query_from_workload(args.data)
        pq[["arm", "query_id", "measure", "value"]].to_parquet(args.out)
        return 0
    if args.worker == "ranx":
        out = _ranx_worker(args.data, args.workload)
        out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(out))
        return 0
    data = args.data
    with tempfile.TemporaryDirectory() as tmp:
        if args.workload == "all-pairs":
            # scored in a child: a forked child's ru_maxrss starts at its parent's resident
            # size, so the parent must stay small for the children's peaks to be their own
            path = Path(tmp) / "per_query.parquet"
            subprocess.run([sys.executable, __file__, "--worker", "per-query", "--data",
                            str(data), "--out", str(path)], check=True)
            rel = ["compare", "--per-query", str(path), "--all-pairs", "--json"]
            n_relgrade, n_ranx = 135 * 20_000, 270 * 1_000
        else:
            rel = ["compare", "--qrels", str(data / "qrels.trec"),
                   *(str(data / "runs" / f"arm0{i}.trec") for i in (1, 2, 3)),
                   "--all-pairs", "--bootstrap", "1000", "--permutations", "1000"]
            for m in MEASURES:
                rel += ["-m", m]
            rel += ["--json"]
            n_relgrade, n_ranx = 9 * 2_000, 18 * 1_000
        rel += ["--workers", str(args.workers)]
        rel_cmd = [sys.executable, "-c",
                   "import resource, sys\nfrom relgrade.cli import main\ntry:\n main()\n"
                   "finally:\n print('PEAK_MIB', resource.getrusage(resource.RUSAGE_SELF)"
                   ".ru_maxrss / 1024, file=sys.stderr)", *rel]
        ranx_cmd = [sys.executable, __file__, "--worker", "ranx", "--data", str(data),
                    "--workload", args.workload]
        rounds = []
        for r in range(args.rounds):
            a = _child(rel_cmd)
            b = _child(ranx_cmd)
            ranx_out = json.loads(b["stdout"].strip().splitlines()[-1])
            rounds.append({"relgrade": {k: a[k] for k in ("wall", "cpu", "load_before",
                                                           "peak_rss_mib")},
                           "ranx": {**{k: b[k] for k in ("wall", "cpu", "load_before")},
                                    "peak_rss_mib": ranx_out["peak_rss_mib"]}})
            print(f"[{r + 1}/{args.rounds}] relgrade {a['cpu']:.1f} CPU-s ({a['wall']:.1f} s "
                  f"wall, load {a['load_before']:.1f}); ranx {b['cpu']:.1f} CPU-s "
                  f"({b['wall']:.1f} s wall, load {b['load_before']:.1f})", file=sys.stderr)
    ratios = [x["ranx"]["cpu"] / x["relgrade"]["cpu"] for x in rounds]
    med = {who: statistics.median(x[who]["cpu"] for x in rounds) for who in ("relgrade", "ranx")}
    summary = {
        "workload": args.workload, "rounds": rounds, "cpu_median": med,
        "ranx_over_relgrade_cpu_median": statistics.median(ratios),
        "ratios": ratios,
        "per_resample_us": {"relgrade": med["relgrade"] / n_relgrade * 1e6,
                            "ranx": med["ranx"] / n_ranx * 1e6},
        "per_resample_ratio_median": statistics.median(
            (x["ranx"]["cpu"] / n_ranx) / (x["relgrade"]["cpu"] / n_relgrade) for x in rounds),
        "load_end": os.getloadavg()[0],
    }
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
