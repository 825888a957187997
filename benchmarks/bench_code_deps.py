"""``dvc repro`` of the tests' tiny experiment with the stages' code deps declared per file and
per folder, in pairs.

    python benchmarks/bench_code_deps.py [--rounds 5] [--work /tmp/code-deps]

The experiment is tests/e2e/tiny.py's, built twice, once per way of declaring the code deps:
``files``, as ``relgrade pipeline render`` writes them (every file of each stage's import
closure), and ``folders`` (:func:`folded`: each top-level sub-package of ``src/relgrade`` the
closure touches as one folder, the modules directly under ``src/relgrade`` and the entry
script as files), each with the repository's ``.dvcignore`` (bytecode left out of a folder),
intents reviewed, ``dvc repro packets`` run (nine stages) and both graders' round files
written from the truth table. Each round copies each build and runs ``dvc repro`` in the copy
(11 stages: packets again, as the grade folder it reads changed, then grades, agreement,
gate, key, the per-arm metrics, publish, compare and report), one variant right after the
other, in alternating order.
Figures: median wall and CPU seconds (user + system of dvc and every stage process it waited
for), the median of the per-round CPU ratios files/folders, and the size of each build's
``dvc.lock`` after the run; the 1-minute load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"files": False, "folders": True}
#: a code dep inside a sub-package or data folder of the package, as rendered
_IN_FOLDER = re.compile(r"^(\s+- (?:\.\./)*src/relgrade/[^/\n]+)/[^\n]+$", re.M)


def folded(text: str) -> str:
    """``dvc.yaml`` text with each code dep inside a folder of ``src/relgrade`` replaced by
    that top-level folder, once per stage (the rendering lists a stage's code deps sorted, so
    a folder's files are adjacent)."""
    out: list[str] = []
    for line in _IN_FOLDER.sub(r"\1", text).splitlines(keepends=True):
        if not (out and line == out[-1] and "src/relgrade/" in line):
            out.append(line)
    return "".join(out)


def build(root: Path, *, folders: bool) -> None:
    """The tiny experiment at ``root`` (empty or missing) with its code deps rendered per
    folder or per file, ``dvc repro packets`` run and the grades written."""
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline import registry
    from tests.e2e import tiny
    from tests.test_e2e_dvc import _pairs

    root.mkdir(parents=True, exist_ok=True)
    tiny.write_inputs(root)
    shutil.copy(ROOT / ".dvcignore", root / ".dvcignore")
    ex = Experiment.load(root / "params.yaml")
    text = registry.render(ex, repo=root)
    (root / "dvc.yaml").write_text(folded(text) if folders else text)
    tiny.git(root, "init", "-q")
    tiny.run(root, "dvc", "init", "-q")
    tiny.run(root, "dvc", "config", "core.analytics", "false")
    tiny.run(root, "relgrade", "intents", "review", "--reviewer", "auditor-b")
    tiny.run(root, "dvc", "repro", "packets")
    pairs, audit_pairs = _pairs(root)
    tiny.write_grades(root, "grader-a", tiny.grade_rows(pairs))
    tiny.write_grades(root, "auditor-b", tiny.grade_rows(audit_pairs))


def timed_repro(root: Path) -> tuple[float, float]:
    """Wall and CPU seconds (float) of ``dvc repro`` in ``root``.

    Raises ``subprocess.CalledProcessError`` if it fails.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(["dvc", "repro"], cwd=root, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def lock_size(root: Path) -> str:
    """``dvc.lock``'s lines, bytes and ``path:`` entries under ``deps`` (as text)."""
    text = (root / "dvc.lock").read_text()
    deps = sum(1 for line in text.splitlines() if line.strip().startswith("- path: src/"))
    return f"{len(text.splitlines())} lines, {len(text.encode())} bytes, {deps} src deps"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work", type=Path, help="an empty folder (default: a temporary one)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        x for x in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if x)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    work = args.work or Path(tempfile.mkdtemp(prefix="code-deps-"))
    for name, folders in VARIANTS.items():
        build(work / f"template-{name}", folders=folders)
    print(f"tiny experiment built twice in {work}; load {os.getloadavg()[0]:.1f}", flush=True)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    for i in range(args.rounds):
        order = list(VARIANTS) if i % 2 == 0 else list(reversed(VARIANTS))
        for name in order:
            copy = work / f"round-{i}-{name}"
            shutil.copytree(work / f"template-{name}", copy, symlinks=True)
            got[name].append(timed_repro(copy))
            if i == 0:
                print(f"{name}: dvc.lock {lock_size(copy)}", flush=True)
            shutil.rmtree(copy)
        print(f"round {i + 1}: " + ", ".join(
            f"{name} wall {runs[-1][0]:.1f} s CPU {runs[-1][1]:.2f} s"
            for name, runs in got.items()) + f" (load {os.getloadavg()[0]:.1f})", flush=True)
    ratio = statistics.median(f[1] / d[1] for f, d in zip(got["files"], got["folders"]))
    cells = ", ".join(f"{name}: wall {statistics.median(w for w, _ in runs):.1f} s, "
                      f"CPU {statistics.median(c for _, c in runs):.2f} s"
                      for name, runs in got.items())
    print(f"dvc repro: {cells}; CPU files/folders {ratio:.2f} "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
