"""``relgrade evaluate`` on the local engine and on Spark (local mode), whole processes.

    python benchmarks/generate.py --seed 7 --out benchmarks/data --only metrics
    python benchmarks/bench_evaluate_spark.py --data benchmarks/data/metrics --repeat 3

Each repeat runs ``relgrade evaluate QRELS RUN x10 -m ndcg_cut.10 -m recall.10 -m
recip_rank --json`` once per engine, alternating (local, spark, local, spark, ...). Every
process is counted whole: this script makes itself a child subreaper (Linux
``PR_SET_CHILD_SUBREAPER``), so the Java process Spark starts, which outlives the Python
process by a moment, is reparented to it and reaped; CPU-seconds are user + system time of
every reaped descendant (``RUSAGE_CHILDREN`` before and after), wall time runs until the last
of them has exited. The two engines' outputs are compared byte for byte. The load average
is recorded before and after; the median of the repeats is reported.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ANCHOR = ("-m", "ndcg_cut.10", "-m", "recall.10", "-m", "recip_rank")
PR_SET_CHILD_SUBREAPER = 36


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _reap(deadline: float) -> None:
    """Wait for every descendant reparented to this process (the Spark JVM)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                raise RuntimeError("a descendant process did not exit")
            time.sleep(0.05)


def run_once(engine: str, qrels: Path, runs: list[Path]) -> tuple[float, float, bytes]:
    """(CPU-seconds, wall seconds, stdout) of one whole ``relgrade evaluate`` process tree."""
    cmd = [sys.executable, "-c", "from relgrade.cli import main; main(prog_name='relgrade')",
           "evaluate", str(qrels), *map(str, runs),
           *ANCHOR, "--json", "--engine", engine]
    before, start = _children_cpu(), time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    _reap(time.monotonic() + 300)
    return _children_cpu() - before, time.monotonic() - start, done.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("benchmarks/data/metrics"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    qrels = args.data / "qrels.trec"
    runs = sorted((args.data / "runs").glob("*.trec"))
    load = [os.getloadavg()]
    results: dict[str, list[tuple[float, float]]] = {"local": [], "spark": []}
    outputs: dict[str, bytes] = {}
    for _ in range(args.repeat):
        for engine in ("local", "spark"):
            cpu, wall, out = run_once(engine, qrels, runs)
            results[engine].append((cpu, wall))
            outputs.setdefault(engine, out)
            print(f"{engine}: {cpu:.2f} CPU-s, {wall:.2f} s wall", file=sys.stderr)
    load.append(os.getloadavg())
    report = {
        "runs": len(runs), "identical_output": outputs["local"] == outputs["spark"],
        "load_before": load[0], "load_after": load[1],
        **{engine: {"cpu_median": statistics.median(c for c, _ in rs),
                    "wall_median": statistics.median(w for _, w in rs),
                    "cpu": [round(c, 2) for c, _ in rs], "wall": [round(w, 2) for _, w in rs]}
           for engine, rs in results.items()},
    }
    print(json.dumps(report, indent=2))
    return 0 if report["identical_output"] else 1


if __name__ == "__main__":
    sys.exit(main())
