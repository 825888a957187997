"""DVC commands on the tests' tiny experiment with ruamel.yaml's C parser and with its pure
Python parser, in pairs.

    python benchmarks/bench_dvc_yaml.py [--rounds 5] [--work /tmp/dvc-yaml]

The experiment is tests/e2e/tiny.py's, built once with ``dvc repro packets`` (nine stages).
Each round runs, for each parser, ``dvc status`` (reads dvc.yaml and dvc.lock, hashes the
deps, runs nothing) and ``dvc repro -f queries`` (one stage run: its lock entry written, the
files read again), one parser right after the other, in alternating order. The pure parser
is the same ``dvc`` entry point with ``ruamel.yaml.main.CParser`` set to ``None`` first,
which is what ``YAML(typ="safe")`` falls back to when ruamel.yaml.clib is not installed.
Figures: median wall and CPU seconds (user + system of dvc and the stage it waited for) and
the median of the per-round CPU ratios; the 1-minute load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE = ("import sys, ruamel.yaml.main as m; m.CParser = None; "
        "from dvc.cli import main; sys.exit(main(sys.argv[1:]))")
C = "import sys; from dvc.cli import main; sys.exit(main(sys.argv[1:]))"
COMMANDS = {"dvc status": ["status"], "dvc repro -f queries": ["repro", "-f", "queries"]}


def timed(root: Path, code: str, args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (float) of ``python -c code *args`` in ``root``.

    Raises ``subprocess.CalledProcessError`` if the command fails.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], cwd=root, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=Path, help="an empty folder (default: a temporary one)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from ruamel.yaml import main as ruamel_main

    from tests.e2e import tiny

    if ruamel_main.CParser is None:
        sys.exit("Error: ruamel.yaml.clib is not installed: there is no C parser to compare")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        x for x in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if x)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    work = args.work or Path(tempfile.mkdtemp(prefix="dvc-yaml-"))
    work.mkdir(parents=True, exist_ok=True)
    tiny.build_packets(work)
    print(f"tiny experiment in {work}; load {os.getloadavg()[0]:.1f}", flush=True)
    for name, cmd in COMMANDS.items():
        got = {"C": [], "pure": []}
        for i in range(args.rounds):
            order = (("C", C), ("pure", PURE)) if i % 2 == 0 else (("pure", PURE), ("C", C))
            for parser, code in order:
                got[parser].append(timed(work, code, cmd))
        ratio = statistics.median(p[1] / c[1] for p, c in zip(got["pure"], got["C"]))
        cells = ", ".join(f"{parser}: wall {statistics.median(w for w, _ in runs):.2f} s, "
                          f"CPU {statistics.median(c for _, c in runs):.2f} s"
                          for parser, runs in got.items())
        print(f"{name}: {cells}; CPU pure/C {ratio:.2f} "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
