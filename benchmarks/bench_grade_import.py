"""`relgrade grade import` of the key grader's whole round, timed on a kept scale experiment.

The experiment (``bench_scale.py --keep``) is copied once; the key grader's round file is
taken out as the file to import and the grader's round files are removed before each run,
so every run is a fresh import of the whole round. Each ``--src`` runs once per repeat in
turn (A B A B ...: paired, interleaved), each as its own process started through
``launch.py`` (CPU-s = user + sys, peak = ``ru_maxrss``). After each run the grade file's
sha256 and the bank sidecar's, with its time of recording masked, are kept: every run must
write the same bytes.

    python benchmarks/bench_grade_import.py KEPT --src BASE/src WT/src --repeats 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import EXP, measured  # noqa: E402

GRADER = "grader-a"


def _masked_sha256(path: Path) -> str:
    """The sha256 of a bank sidecar with every ``graded_at`` value blanked."""
    data = re.sub(rb'"graded_at":"[^"]*"', b'"graded_at":""', path.read_bytes())
    return hashlib.sha256(data).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kept", type=Path, help="an experiment folder bench_scale.py kept")
    ap.add_argument("--src", type=Path, nargs="+", required=True)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep-files", type=Path, default=None,
                    help="copy the last run's grade file and bank sidecar into this folder")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="relgrade-import-", dir=args.kept.resolve().parent))
    try:
        exp = root / EXP
        exp.parent.mkdir(parents=True)
        shutil.copytree(args.kept, exp, symlinks=True)
        folder = exp / "data/grades" / GRADER
        source = root / f"{GRADER}.jsonl"
        shutil.copy(folder / "round-1.jsonl", source)
        cmd = [sys.executable, "-c", "from relgrade.cli import main; main()", "grade", "import",
               str(source), "--grader", GRADER, "--experiment", EXP]
        out = {str(s): [] for s in args.src}
        for _ in range(args.repeats):
            for src in args.src:
                shutil.rmtree(folder)
                run = measured(cmd, root, src.resolve())
                run["grades_sha256"] = hashlib.sha256(
                    (folder / "round-1.jsonl").read_bytes()).hexdigest()
                run["bank_sha256_masked"] = _masked_sha256(folder / "round-1.bank.jsonl")
                out[str(src)].append(run)
                print(f"  grade import [{src}]: {run['cpu_s']:.1f} CPU-s, {run['wall_s']:.1f} s, "
                      f"{run['rss_mib']:.0f} MiB, grades {run['grades_sha256'][:12]}, bank "
                      f"{run['bank_sha256_masked'][:12]}", file=sys.stderr, flush=True)
        if args.keep_files is not None:
            args.keep_files.mkdir(parents=True, exist_ok=True)
            for name in ("round-1.jsonl", "round-1.bank.jsonl"):
                shutil.copy(folder / name, args.keep_files / name)
        same = {(r["grades_sha256"], r["bank_sha256_masked"]) for runs in out.values()
                for r in runs}
        print(f"  the same bytes in every run: {len(same) == 1}", file=sys.stderr)
        if args.out is not None:
            args.out.write_text(json.dumps(out, indent=2) + "\n")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
