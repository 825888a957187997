"""Comparison speed, side by side: relgrade's paired statistics against ranx's ``compare``.

    python benchmarks/generate.py --seed 7 --only metrics
    python benchmarks/bench_stats.py [--data benchmarks/data/metrics] [--workers 1 2] [--ranx]

Workload: the metrics workload of ``generate.py`` (10,000 queries x 10 arms x depth 100,
qrels with 20 graded chunks per query). Per-query values of three measures,
``nDCG(dcg='exp-log2')@10``, ``R@10`` and ``RR@10``, come from ``relgrade.evaluation.metrics.per_query``
(timed apart: scoring is not part of the comparison). Without the workload on disk the
script falls back to seeded synthetic per-query values of the same shape (``--synthetic``).

relgrade: ``compare.compare_arms`` with every pair of arms (45 pairs x 3 measures = 135
comparisons), each with 10,000 paired bootstrap resamples (the interval by relgrade's
rule) and 10,000 sign-flip permutations, plus the 30 per-arm intervals, Holm over the 135. It runs twice per worker
count; the sha256 of the JSON report must be the same for every run and worker count, or the
script stops.

Since the shared resample plan (``relgrade.evaluation.resample``) every comparison reads its
resamples off one seeded draw per query set, so the 135 comparisons cost little more than one.

Whole process (``--cli``): the same comparison as the command a user runs,
``relgrade compare --per-query FILE --all-pairs --json`` on the per-query values written to a
Parquet file, timed as a subprocess (interpreter start, imports, reading and printing
included; CPU from the child's rusage; the load average before each run printed),
``--rounds`` times per worker count after ``--warmup`` unrecorded runs; medians are printed.
Its arms and comparisons must equal the in-process report's, or the script stops. With
``--baseline-src DIR`` (another version's ``src`` folder, e.g. the commit before) the rounds
are paired, this version then that one, A B A B, and the ratio of the median CPU-seconds is
printed.

ranx: ``ranx.compare`` on the same qrels and runs with ``stat_test="fisher"`` and 1,000
permutations (its evaluation included; its metrics ``ndcg_burges@10``, ``recall@10``,
``mrr@10`` are the same three measures, which the script checks against relgrade's values).
ranx runs the test for each ordered pair, 90 per measure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from relgrade.evaluation import compare, metrics, settings

MEASURES = ["nDCG(dcg='exp-log2')@10", "R@10", "RR@10"]
RANX = {"nDCG(dcg='exp-log2')@10": "ndcg_burges@10", "R@10": "recall@10", "RR@10": "mrr@10"}


def per_query_from_workload(data: Path):
    qrels = pd.read_parquet(data / "qrels.parquet")
    runs = {p.stem: pd.read_parquet(p) for p in sorted((data / "runs").glob("*.parquet"))}
    t = time.perf_counter()
    stacked = pd.concat([r.assign(arm=a) for a, r in runs.items()], ignore_index=True)
    pq = metrics.per_query(qrels=qrels, run=stacked, measures=MEASURES)
    return pq, time.perf_counter() - t, qrels, runs


def synthetic_per_query(seed: int, n_queries=10_000, n_arms=10) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.beta(2, 3, size=n_queries)
    rows = []
    for a in range(n_arms):
        for i, m in enumerate(MEASURES):
            v = np.clip(base + 0.01 * a + rng.normal(0, 0.15, n_queries) + 0.05 * i, 0, 1)
            rows.append(pd.DataFrame({"arm": f"arm{a + 1:02d}", "query_id": np.arange(n_queries)
                                      .astype(str), "measure": m, "value": v}))
    return pd.concat(rows, ignore_index=True)


def run_relgrade(pq: pd.DataFrame, workers: int, seed: int, resamples: int, perms: int):
    s = settings.Settings(seed=seed, n_resamples=resamples, n_permutations=perms, pairs="all")
    t, cpu = time.perf_counter(), time.process_time()
    result = compare.compare_arms(pq, settings=s, workers=workers)
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    digest = hashlib.sha256(result.to_json().encode()).hexdigest()
    return elapsed, cpu, digest, result


def _core_digest(report_json: str) -> str:
    """sha256 of the arms and comparisons of a JSON report (the numbers, not the inputs)."""
    doc = json.loads(report_json)
    core = json.dumps({"arms": doc["arms"], "comparisons": doc["comparisons"]}, sort_keys=True)
    return hashlib.sha256(core.encode()).hexdigest()


def _cli_once(cmd, env):
    """One whole process: (wall s, CPU s from the child's rusage, load average before, stdout)."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, load, out


def run_cli(pq: pd.DataFrame, workers: int, seed: int, resamples: int, perms: int,
            rounds: int, baseline_src: Path | None = None, warmup: int = 1):
    """Wall and CPU seconds of ``relgrade compare --per-query`` as a subprocess, per round.

    With ``baseline_src`` (the ``src`` folder of another relgrade version) the rounds are
    paired: this version, then that one, then this one ... (A B A B), each a fresh process
    with ``PYTHONPATH`` set to its ``src``. ``warmup`` unrecorded runs of each come first
    (numba's on-disk cache is filled then).

    Returns
    -------
    dict : contender -> {"walls", "cpus", "loads", "digests"}
    """
    contenders = {"this": None}
    if baseline_src is not None:
        contenders["baseline"] = Path(baseline_src).resolve()
    res = {c: {"walls": [], "cpus": [], "loads": [], "digests": set()} for c in contenders}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "per_query.parquet"
        pq[["arm", "query_id", "measure", "value"]].to_parquet(path)
        cmd = [sys.executable, "-c", "from relgrade.cli import main; main()", "compare",
               "--per-query", str(path), "--all-pairs", "--json", "--workers", str(workers),
               "--seed", str(seed), "--bootstrap", str(resamples),
               "--permutations", str(perms)]
        envs = {}
        for c, src in contenders.items():
            env = dict(os.environ)
            if src is not None:
                env["PYTHONPATH"] = str(src)
            envs[c] = env
        for _ in range(warmup):
            for c in contenders:
                _cli_once(cmd, envs[c])
        for _ in range(rounds):
            for c in contenders:
                wall, cpu, load, out = _cli_once(cmd, envs[c])
                r = res[c]
                r["walls"].append(wall)
                r["cpus"].append(cpu)
                r["loads"].append(load)
                r["digests"].add(_core_digest(out))
    return res


def run_ranx(qrels: pd.DataFrame, runs: dict, perms: int):
    from ranx import Qrels, Run, evaluate
    from ranx import compare as ranx_compare

    ids = {"query_id": object, "chunk_id": object}
    q = Qrels.from_df(qrels.astype({**ids, "grade": int}), q_id_col="query_id",
                      doc_id_col="chunk_id", score_col="grade")
    rs = []
    for name, r in runs.items():
        run = Run.from_df(r.astype(ids), q_id_col="query_id", doc_id_col="chunk_id",
                          score_col="score")
        run.name = name
        rs.append(run)
    names = list(RANX.values())
    evaluate(q, rs[0], names, make_comparable=True)      # numba compilation, not timed
    t = time.perf_counter()
    # make_comparable: a query an arm did not answer scores 0, as in relgrade
    report = ranx_compare(q, rs, metrics=names, stat_test="fisher", n_permutations=perms,
                          max_p=0.05, make_comparable=True)
    elapsed = time.perf_counter() - t
    return elapsed, report, q, rs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("benchmarks/data/metrics"))
    ap.add_argument("--synthetic", action="store_true", help="seeded per-query values instead")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--permutations", type=int, default=10_000)
    ap.add_argument("--ranx", action="store_true", help="also time ranx.compare (1,000 perms)")
    ap.add_argument("--ranx-permutations", type=int, default=1_000)
    ap.add_argument("--no-relgrade", action="store_true", help="time ranx only")
    ap.add_argument("--cli", action="store_true",
                    help="also time the whole `relgrade compare --per-query` process")
    ap.add_argument("--rounds", type=int, default=3, help="whole-process runs per worker count")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="the src folder of another relgrade version (e.g. from git archive "
                         "of an earlier commit): --cli then pairs its runs with this "
                         "version's, A B A B")
    ap.add_argument("--warmup", type=int, default=1,
                    help="unrecorded whole-process runs of each contender before the rounds")
    args = ap.parse_args(argv)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}")
    qrels = runs = None
    if args.synthetic or not (args.data / "qrels.parquet").exists():
        pq = synthetic_per_query(args.seed)
        print("per-query values: synthetic (seeded)")
    else:
        pq, t_pq, qrels, runs = per_query_from_workload(args.data)
        print(f"per-query values: relgrade.evaluation.metrics.per_query, 3 measures x 10 arms x "
              f"10,000 queries in {t_pq:.1f} s")
    n_arms = pq["arm"].nunique()
    n_comp = n_arms * (n_arms - 1) // 2 * len(MEASURES)
    digests, cores = set(), set()
    for w in ([] if args.no_relgrade else args.workers):
        for attempt in (1, 2):
            load = os.getloadavg()[0]
            elapsed, cpu, digest, result = run_relgrade(pq, w, args.seed, args.resamples,
                                                        args.permutations)
            digests.add(digest)
            cores.add(_core_digest(result.to_json()))
            print(f"relgrade compare_arms: {n_comp} comparisons + {n_arms * len(MEASURES)} "
                  f"arm intervals, {args.resamples} resamples + {args.permutations} sign "
                  f"flips each, workers={w}, run {attempt}: {elapsed:.1f} s wall, "
                  f"{cpu:.1f} s CPU, load average before {load:.1f}, sha256 {digest[:16]}")
    if len(digests) > 1:
        print("ERROR: reports differ between runs or worker counts",
              file=sys.stderr)
        return 1
    if digests:
        print("reports identical across runs and worker counts")
    if args.cli:
        for w in args.workers:
            res = run_cli(pq, w, args.seed, args.resamples, args.permutations, args.rounds,
                          args.baseline_src, args.warmup)
            for c, r in res.items():
                if len(r["digests"]) > 1 or c == "this" and cores and r["digests"] != cores:
                    print(f"ERROR: the command's numbers ({c}) differ from compare_arms' or "
                          "between rounds", file=sys.stderr)
                    return 1
                name = ("this version" if c == "this" else
                        f"baseline ({args.baseline_src})")
                print(f"relgrade compare --per-query (whole process), {name}, workers={w}, "
                      f"{args.rounds} rounds: median {statistics.median(r['cpus']):.2f} s CPU "
                      f"(runs {', '.join(f'{x:.2f}' for x in r['cpus'])}), median "
                      f"{statistics.median(r['walls']):.1f} s wall "
                      f"(runs {', '.join(f'{x:.1f}' for x in r['walls'])}), load average "
                      f"before each run {', '.join(f'{x:.1f}' for x in r['loads'])}; "
                      + ("identical across rounds" + (" and equal to compare_arms'"
                                                      if c == "this" and cores else "")))
            if "baseline" in res:
                ratio = (statistics.median(res["baseline"]["cpus"])
                         / statistics.median(res["this"]["cpus"]))
                print(f"paired rounds (A B A B): baseline / this version, median CPU: "
                      f"{ratio:.1f}x")
    if args.ranx:
        if runs is None:
            print("ranx needs the generated workload (qrels and runs); skipped")
            return 0
        load, cpu = os.getloadavg()[0], time.process_time()
        elapsed, report, _, _ = run_ranx(qrels, runs, args.ranx_permutations)
        cpu = time.process_time() - cpu
        print(f"ranx.compare, fisher, {args.ranx_permutations} permutations, 90 ordered "
              f"pairs x 3 measures (evaluation included): {elapsed:.1f} s wall, {cpu:.1f} s "
              f"CPU (numba threads; Run/Qrels building included), load average before "
              f"{load:.1f}")
        # the same measures: ranx's means equal relgrade's per-arm means
        ours = pq.groupby(["arm", "measure"])["value"].mean()
        worst = max(abs(ours[(arm, m)] - report.results[arm][rname])
                    for m, rname in RANX.items() for arm in sorted(pq["arm"].unique()))
        print(f"largest |relgrade mean - ranx mean| over 30 arm x measure: {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
