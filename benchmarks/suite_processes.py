"""Where an end-to-end test module's CPU goes, process by process: every Python process the
run starts (pytest, ``dvc``, each stage DVC runs, each ``relgrade`` command, the graders'
commands) records its own user + system seconds, its argv, the stage DVC named in
``DVC_STAGE`` and which heavy libraries it had loaded, when it exits; the table sums them by
kind of process.

    python benchmarks/suite_processes.py tests/test_e2e_init.py [MORE ...] \\
        [--out benchmarks/out/suite_processes.jsonl]

The record is made by a ``sitecustomize`` module this script writes into a temporary folder
put first on ``PYTHONPATH`` (Python imports ``sitecustomize`` at start-up; DVC passes the
environment on to the stages it runs), so nothing in the repository or the environment is
changed. A process's own CPU seconds exclude its children's, so the kinds add up to the run's
total; a process killed by a signal, or ended by ``os._exit``, records nothing. The modules
run in one pytest run (``-p no:randomly -p no:cacheprovider``), as one xdist worker runs
them. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The libraries whose import is most of a process's start-up, recorded per process.
HEAVY = ("pandas", "pyarrow", "scipy", "sklearn", "statsmodels", "duckdb", "numba", "pydantic")

SITECUSTOMIZE = '''\
import atexit, json, os, sys

_OUT = os.environ.get("RELGRADE_PROCESS_LOG")


def _record():
    t = os.times()
    row = {"argv": sys.argv[:6], "cpu_s": t.user + t.system,
           "stage": os.environ.get("DVC_STAGE"),
           "loaded": [m for m in %r if m in sys.modules]}
    try:
        with open(_OUT, "a") as f:
            f.write(json.dumps(row) + "\\n")
    except OSError:
        pass


if _OUT:
    atexit.register(_record)
''' % (HEAVY,)


def kind(row: dict) -> str:
    """The kind of process a record is: ``stage NAME`` (DVC ran it), ``dvc CMD``,
    ``relgrade CMD``, ``pytest`` or ``other NAME`` (a grader's script)."""
    argv = row["argv"] or [""]
    name = argv[0].rsplit("/", 1)[-1]
    words = [a for a in argv[1:] if not a.startswith("-")]
    if row.get("stage"):
        stage = row["stage"].rsplit(":", 1)[-1].split("@")[0]
        return f"stage {stage}"
    if name == "dvc":
        return "dvc " + " ".join(words[:2] if words[:1] == ["exp"] else words[:1])
    if name == "relgrade":
        return "relgrade " + (words[0] if words else "")
    if name == "pytest" or "/pytest/" in argv[0]:
        return "pytest"
    return f"other {name}"


def summarise(rows: list[dict]) -> list[tuple[str, int, float]]:
    """``(kind, processes, CPU seconds)`` per kind of process, the costliest first."""
    total = collections.defaultdict(lambda: [0, 0.0])
    for row in rows:
        k = total[kind(row)]
        k[0] += 1
        k[1] += row["cpu_s"]
    return sorted(((k, n, s) for k, (n, s) in total.items()), key=lambda t: -t[2])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="+", help="test modules, relative to the repository")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/out/suite_processes.jsonl")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as hook:
        Path(hook, "sitecustomize.py").write_text(SITECUSTOMIZE)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.unlink(missing_ok=True)
        env = {**os.environ, "RELGRADE_PROCESS_LOG": str(args.out.resolve()),
               "PYTHONPATH": os.pathsep.join(filter(None, [hook, os.environ.get("PYTHONPATH")]))}
        load = os.getloadavg()[0]
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
                               "-p", "no:cacheprovider", *args.modules], cwd=ROOT, env=env,
                              capture_output=True, text=True)
    rows = [json.loads(x) for x in args.out.read_text().splitlines()]
    table = summarise(rows)
    grand = sum(s for _, _, s in table)
    print(f"{' '.join(args.modules)}: {proc.stdout.strip().splitlines()[-1]}; load "
          f"{load:.1f}-{os.getloadavg()[0]:.1f}")
    print("| process | count | CPU s | share | CPU s each |")
    print("|---|---|---|---|---|")
    for k, n, s in table:
        print(f"| {k} | {n} | {s:.1f} | {100 * s / grand:.1f}% | {s / n:.2f} |")
    print(f"| all | {len(rows)} | {grand:.1f} | | |")
    if proc.returncode != 0:
        print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
        sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
