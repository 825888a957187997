"""Time of test modules, each run alone as ``python -m pytest -q -p no:cacheprovider MODULE``:
wall seconds and CPU seconds (user + system of pytest and every process it waited for: the
``dvc``, ``relgrade`` and stage processes the end-to-end tests start), with the 1-minute load
average at the start and end of each run.

    python benchmarks/suite_modules.py tests/test_e2e_dvc.py tests/test_e2e_void.py \\
        [--rounds 1] [--before TREE] [--together] [--out benchmarks/out/suite_modules.json]

With ``--together`` the modules run in one pytest run, as one xdist worker runs them: a
session fixture they share (tests/conftest.py) is built once, which a run of each module
alone cannot show.

With ``--before TREE`` (another checkout of the repository, e.g. ``git worktree add`` of the
previous commit), each round runs the module from that tree right before this one, so the two
runs of a pair see about the same load; the table gives medians over the rounds and the
median of the per-round CPU ratios. CPU seconds are the figure to compare on a shared
machine: wall time grows with the other jobs, CPU time much less. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_module(tree: Path, module: str) -> dict:
    """One pytest run of ``module`` (a path relative to ``tree``, or several separated by
    spaces: one run of them all) in ``tree`` with ``tree/src`` first on ``PYTHONPATH``.

    Returns ``{"wall_s", "cpu_s", "load_start", "load_end", "outcome"}``: seconds (float),
    1-minute load averages (float) and pytest's last summary line (str).
    Raises ``subprocess.CalledProcessError`` if pytest exits with a failure, after printing
    the end of pytest's output (its failures) to stderr.
    """
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *module.split()]
    load_start = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print(proc.stdout[-6000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
        raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout, proc.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "outcome": proc.stdout.strip().splitlines()[-1]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="+", help="test modules, relative to the repository")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--before", type=Path, help="another checkout to pair each run with")
    ap.add_argument("--together", action="store_true",
                    help="run the modules in one pytest run, as one xdist worker runs them "
                         "(session fixtures built once)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/suite_modules.json")
    args = ap.parse_args(argv)
    results = {}
    for module in [" ".join(args.modules)] if args.together else args.modules:
        rounds = []
        for _ in range(args.rounds):
            pair = {}
            if args.before:
                pair["before"] = run_module(args.before.resolve(), module)
            pair["now"] = run_module(ROOT, module)
            rounds.append(pair)
        results[module] = rounds
        now = [r["now"] for r in rounds]
        line = (f"{module}: wall {statistics.median(r['wall_s'] for r in now):.1f} s, "
                f"CPU {statistics.median(r['cpu_s'] for r in now):.1f} s")
        if args.before:
            then = [r["before"] for r in rounds]
            ratio = statistics.median(r["before"]["cpu_s"] / r["now"]["cpu_s"] for r in rounds)
            line += (f"; before: wall {statistics.median(r['wall_s'] for r in then):.1f} s, "
                     f"CPU {statistics.median(r['cpu_s'] for r in then):.1f} s; "
                     f"CPU before/now {ratio:.2f}")
        loads = [x for r in rounds for p in r.values() for x in (p["load_start"], p["load_end"])]
        print(f"{line} (load {min(loads):.1f}-{max(loads):.1f}; {now[-1]['outcome']})",
              flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
