"""CPU seconds of single stage processes and ``relgrade`` commands, each paired with the same
process on other code, run interleaved (before, after; then after, before; ...).

    python benchmarks/process_pairs.py --root EXPERIMENT --before OTHER/src --rounds 6 \\
        stages/queries.py stages/gate.py "stages/metrics.py lexical" "relgrade status"

``EXPERIMENT`` is an experiment after a full ``dvc repro`` (the tiny one of the end-to-end
tests, say): each line runs there as DVC runs a stage (``python stages/NAME.py [ARM]`` with
``DVC_STAGE`` set, so the pipeline-shape check runs too) or as the ``relgrade`` program
(``relgrade ...``, through the console script's entry), once with ``OTHER/src`` first on
``PYTHONPATH`` (the code before a change; give it its compiled modules and bytecode) and
once with the installed package. A stage run again on the same inputs writes the same
outputs, so ``dvc status`` in the experiment afterwards says whether either code changed
them. CPU seconds are user + system of the whole process and every process it waited for
(``os.wait4``), interpreter start and shutdown included; peak RSS is the process's. The table
gives the medians of each side and the median of the per-pair differences, with the load
average at the end. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys


def run(root: str, line: str, before: str | None) -> tuple[float, int]:
    """One run of ``line`` in ``root``; ``(CPU seconds, peak RSS in KiB)``."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if before:
        env["PYTHONPATH"] = before
    argv = line.split()
    if argv[0] == "relgrade":
        argv = [sys.executable, "-c", "import sys; from relgrade.cli import main; "
                "sys.argv[0] = 'relgrade'; sys.exit(main())", *argv[1:]]
    else:
        env["DVC_STAGE"] = argv[0].rsplit("/", 1)[-1].removesuffix(".py")
        argv = [sys.executable, *argv]
    proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{line} ({'before' if before else 'after'}) failed:\n{err[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="an experiment after a full dvc repro")
    ap.add_argument("--before", required=True, help="the src folder of the code before")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("lines", nargs="+", help="'stages/NAME.py [ARM]' or 'relgrade ...'")
    args = ap.parse_args()
    runs: dict[tuple[str, bool], list[tuple[float, int]]] = {}
    for r in range(args.rounds):
        for line in args.lines:
            for before in ((True, False) if r % 2 == 0 else (False, True)):
                runs.setdefault((line, before), []).append(
                    run(args.root, line, args.before if before else None))
    print("| process | before: CPU s | after: CPU s | saved (median pair) | peak RSS MB |")
    print("|---|---|---|---|---|")
    for line in args.lines:
        a, b = runs[(line, True)], runs[(line, False)]
        saved = statistics.median(x[0] - y[0] for x, y in zip(a, b))
        print(f"| `{line}` | {statistics.median(x[0] for x in a):.3f} | "
              f"{statistics.median(x[0] for x in b):.3f} | {saved:.3f} | "
              f"{statistics.median(x[1] for x in b) / 1024:.0f} |")
    print(f"\nload average at the end: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
