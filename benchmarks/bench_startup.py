"""Start-up time of the ``relgrade`` command: ``--version``, ``--help`` and each command's
``--help``, whole process (interpreter start and imports included).

    python benchmarks/bench_startup.py [--rounds 15] [--before SRC]

Each round runs every command line once as a fresh subprocess and records its wall time; the
table gives the median over the rounds. With ``--before SRC`` (the ``src`` folder of another
relgrade checkout, e.g. the previous release), each round also runs the same command line on
that code right after, and the table adds the median of the per-round ratios before/now.
There is no hyperfine here; ``time.perf_counter`` around ``subprocess.run`` measures the same
thing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
COMMANDS = ["aggregate", "agreement", "audit", "clicks", "compare", "evaluate", "grade",
            "intents", "packets", "queries", "serve", "status"]
TARGET_S = 0.3


def _time(args: list[str], src: Path) -> tuple[float, float]:
    """Wall and CPU (user + system, from the child's rusage) seconds of one process."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-c", "from relgrade.cli import main; main()", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--before", type=Path, default=None,
                    help="src folder of another relgrade checkout to compare with")
    args = ap.parse_args(argv)
    lines = [["--version"], ["--help"]] + [[c, "--help"] for c in COMMANDS]
    now = {tuple(a): [] for a in lines}
    before = {tuple(a): [] for a in lines}
    for _ in range(args.rounds):
        for a in lines:
            now[tuple(a)].append(_time(a, SRC))
            if args.before is not None:
                before[tuple(a)].append(_time(a, args.before))
    print(f"# {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {args.rounds} rounds, "
          f"load average at the end {os.getloadavg()[0]:.2f}")
    head = "| command line | median wall s | max wall s | median CPU s | under 0.3 s |"
    if args.before is not None:
        head += " before: median wall s | median ratio before/now (wall) |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for a in lines:
        t = [w for w, _ in now[tuple(a)]]
        cpu = [c for _, c in now[tuple(a)]]
        row = (f"| relgrade {' '.join(a)} | {statistics.median(t):.3f} | {max(t):.3f} | "
               f"{statistics.median(cpu):.3f} | "
               f"{'yes' if statistics.median(t) < TARGET_S else 'NO'} |")
        if args.before is not None:
            b = [w for w, _ in before[tuple(a)]]
            ratios = [x / y for x, y in zip(b, t)]
            row += f" {statistics.median(b):.3f} | {statistics.median(ratios):.1f} |"
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
