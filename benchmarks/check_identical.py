"""Check that two revisions of relgrade write the same bytes for the same experiment.

    python benchmarks/check_identical.py --base REV [--queries 120 360] [--seed 7]

For each N the experiment of ``bench_scale.py`` (N queries, three file arms, depth 20,
imported grades) is made twice from the same seed: once with the stages and code of
revision ``REV`` (``git archive``), once with this checkout; every stage runs in order in
each. Then every file of the two experiment folders is compared byte for byte, after one
masking: ISO times (``2026-12-02T11:30:00+00:00``), which record when a key was frozen or a
metrics stage ran, and the temporary folder each experiment was built in, which bank lines
name as the folder of the file a grade import came from. Exits 1 and lists the files that
differ, if any.

Used to show that a change to the stages' speed left every output as it was.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scale  # noqa: E402

REPO = bench_scale.REPO
_TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")


def export(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (src, stages, rubric, dvc.yaml, params.yaml) under ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "src", "stages",
                              "rubric", "dvc.yaml", "params.yaml"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def files(folder: Path, root: Path | None = None) -> dict[str, bytes]:
    """Every file under ``folder``, ISO times masked, and the temporary ``root`` the
    experiment was built in (named on bank lines: the file each grade import came from)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = _TIME.sub(b"<time>", p.read_bytes())
            if root is not None:
                data = data.replace(str(root).encode(), b"<root>")
            out[p.relative_to(folder).as_posix()] = data
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="The git revision to compare with.")
    ap.add_argument("--queries", type=int, nargs="+", default=[120])
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="relgrade-identical-"))
    bad = 0
    try:
        base = export(args.base, work / "base")
        for n in args.queries:
            out = {}
            for name, tree in (("base", base), ("new", REPO)):
                root = work / f"{name}-{n}"
                root.mkdir()
                exp, truth = bench_scale.build(root, n, args.seed, tree)
                bench_scale.run_pipeline(exp, truth, args.seed, tree / "src",
                                         label=f"{name} N={n} ")
                out[name] = files(exp, root)
            a, b = out["base"], out["new"]
            differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            print(f"N={n}: {len(a)} files compared; {len(differ)} differ"
                  + "".join(f"\n  {k}" for k in differ))
            bad += len(differ)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
