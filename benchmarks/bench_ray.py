"""Grading throughput on the local and the Ray executor while the grader is the bottleneck.

    python benchmarks/bench_ray.py [--workers 1 2 4 8] [--sleep 1.0] [--rounds 4]

A grader command that sleeps ``--sleep`` seconds per batch, then answers (a fresh Python
process per batch, as in production). For each executor and each N of ``--workers``,
``rounds * N`` batches of five chunks are graded with N workers through
:func:`relgrade.graders.command.run_grader` (the real store, fsync and single writer), and
the script reports batches per second, the ideal ``N / sleep``, the ratio, the CPU seconds
of this process and every process under it during the run (the grader processes, and for
Ray its raylet and workers with their grader processes; from psutil, which Ray installs)
and the 1-minute load average after it. The Ray executor runs on a local Ray instance
started once with ``max(8, N)`` CPUs; before each N, N trivial tasks run at once so that N
Ray worker processes exist (a cluster's one-time cost: its start-up and this warm-up are
reported on their own, not in the throughput). The target is at least ``0.8 * N / sleep``
batches per second.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from relgrade.graders import command as graderun
from relgrade.graders.store import GradeStore

SLEEPY = r'''
import json, sys, time
req = json.loads(sys.stdin.buffer.read())
time.sleep(float(sys.argv[1]))
for c in req["chunks"]:
    print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                      "reason": "states the answer in full", "grade": 1}))
'''


def cpu_seconds() -> float:
    """CPU seconds of this process and all its descendants, with their reaped children."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _nap(seconds: float) -> None:
    time.sleep(seconds)


def packets(n_batches: int) -> dict:
    out = {}
    for q in range(n_batches):  # one batch of five chunks per query: N queries run at once
        qid = f"q{q:04d}"
        chunks = [{"chunk_id": f"{qid}-c{j}", "header": f"h{j}", "text": f"text {j}"}
                  for j in range(5)]
        out[qid] = {"query_id": qid, "query": "where is it", "intent": "Find it.",
                    "rubric_version": "v1", "intents_sha256": "a" * 64, "round": 1,
                    "batches": [chunks]}
    return out


def run_once(folder: Path, *, executor: str, workers: int, n_batches: int, script: Path,
             sleep: float) -> dict:
    setup = graderun.GraderSetup(name="g", role="grader", kind="model",
                                 argv=(sys.executable, "-S", str(script), str(sleep)),
                                 timeout=60.0, retries=0, workers=workers, executor=executor)
    store = GradeStore(folder / f"{executor}-{workers}.jsonl").open()
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    try:
        s = graderun.run_grader(packets(n_batches), setup=setup, store=store, rubric="r",
                                scale=[0, 1, 2], max_reason_words=15)
    finally:
        store.close()
    wall = time.perf_counter() - t0
    assert s.batches == n_batches and not s.failures, s
    return {"executor": executor, "workers": workers, "batches": n_batches, "seconds": wall,
            "rate": n_batches / wall, "ideal": workers / sleep,
            "cpu": cpu_seconds() - cpu0, "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--sleep", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--executors", nargs="+", default=["local", "ray"])
    args = ap.parse_args()
    print(f"# {platform.platform()}, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs; grader sleeps {args.sleep:g} s per batch; "
          f"{args.rounds} x N batches per run")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        script = folder / "sleepy.py"
        script.write_text(SLEEPY)
        for executor in args.executors:
            if executor == "ray":
                import ray

                t0 = time.perf_counter()
                ray.init(num_cpus=max(8, *args.workers), include_dashboard=False,
                         log_to_driver=False)
                print(f"# local Ray instance started in {time.perf_counter() - t0:.1f} s")
            try:
                for n in args.workers:
                    if executor == "ray":
                        t0 = time.perf_counter()
                        warm = ray.remote(num_cpus=1)(_nap)
                        ray.get([warm.remote(0.5) for _ in range(n)])
                        print(f"# {n} Ray workers warm in {time.perf_counter() - t0:.1f} s")
                    results.append(run_once(folder, executor=executor, workers=n,
                                            n_batches=args.rounds * n, script=script,
                                            sleep=args.sleep))
                    r = results[-1]
                    print(f"{executor:5s} N={n}: {r['batches']} batches in {r['seconds']:.2f} s"
                          f" = {r['rate']:.2f} batches/s (ideal {r['ideal']:.2f}, "
                          f"{r['rate'] / r['ideal']:.0%}); CPU {r['cpu']:.1f} s, "
                          f"load {r['load']:.2f}", flush=True)
            finally:
                if executor == "ray":
                    ray.shutdown()
    print()
    print("| executor | N | batches | seconds | batches/s | ideal N/sleep | ratio | CPU s | "
          "load (1 min) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['executor']} | {r['workers']} | {r['batches']} | {r['seconds']:.2f} | "
              f"{r['rate']:.2f} | {r['ideal']:.2f} | {r['rate'] / r['ideal']:.2f} | "
              f"{r['cpu']:.1f} | {r['load']:.2f} |")


if __name__ == "__main__":
    main()
