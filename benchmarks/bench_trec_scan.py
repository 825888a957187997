"""When the compiled TREC run scan repays loading it: `relgrade evaluate` on 1..10 runs.

    python benchmarks/bench_trec_scan.py --runs 1,2,4,10 --repeat 3

For each number of runs (the first N of ``benchmarks/data/metrics/runs/arm*.trec``, made by
``generate.py --seed 7 --only metrics``: about 1M lines and 40 MB each), the command
``relgrade evaluate QRELS RUN... --json --missing skip -m ndcg_cut.10 -m recall.10 -m
recip_rank`` is run in a fresh process with the scan forced off (``SCAN_MIN_BYTES`` set
beyond any input) and forced on (set to 0), the two interleaved within each round. CPU
seconds are the child process's user + system time, interpreter start and imports included;
peak memory its maximum resident set. The outputs of the two are compared byte for byte.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

MEASURES = ["-m", "ndcg_cut.10", "-m", "recall.10", "-m", "recip_rank"]

CHILD = """
import sys
from relgrade.io import trec_scan
trec_scan.SCAN_MIN_BYTES = int(sys.argv[1])
from relgrade.cli import main
main(sys.argv[2:], prog_name="relgrade")
"""


def _child(threshold: int, args: list[str]) -> tuple[float, float, bytes]:
    """CPU seconds, peak RSS (MiB) and stdout of one child, its own rusage (wait4)."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(threshold), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"relgrade evaluate exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("benchmarks/data/metrics"))
    ap.add_argument("--runs", default="1,2,4,10")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    arms = sorted((args.data / "runs").glob("arm*.trec"))
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    rows = []
    for n in map(int, args.runs.split(",")):
        cmd = ["evaluate", str(args.data / "qrels.trec"), *map(str, arms[:n]), "--json",
               "--missing", "skip", *MEASURES]
        off, on, peak_off, peak_on = [], [], [], []
        for _ in range(args.repeat):
            c0, m0, out0 = _child(1 << 62, cmd)
            c1, m1, out1 = _child(0, cmd)
            if out0 != out1:
                raise SystemExit(f"{n} runs: the outputs differ")
            print(f"  {n} runs: reader {c0:.2f} s, scan {c1:.2f} s", flush=True)
            off.append(c0)
            on.append(c1)
            peak_off.append(m0)
            peak_on.append(m1)
        ratio = statistics.median(b / a for a, b in zip(off, on))
        rows.append((n, statistics.median(off), statistics.median(on), ratio,
                     max(peak_off), max(peak_on)))
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print("| runs | reader CPU s | scan CPU s | scan / reader (median per round) "
          "| peak RSS MiB reader / scan |")
    print("|---|---|---|---|---|")
    for n, a, b, r, ma, mb in rows:
        print(f"| {n} | {a:.2f} | {b:.2f} | {r:.2f} | {ma:.0f} / {mb:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
