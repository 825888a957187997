"""One grader's round file and bank sidecar read into the judgment bank: rows against columns.

    python benchmarks/bench_bank_columns.py --rows 1336314 [--repeats 3] [--dir DIR]

Writes a grade file of N rows and its bank sidecar as ``relgrade grade import`` writes them
(canonical JSON lines; every bank line with the pair, three sha256 hashes, the rubric, the
time, the row's sha256 and the import's ``imported_from`` record), 37 chunks per query as
in ``bench_scale.py`` (1,336,314 rows is its 36,000-query pool). Then builds the judgment
bank's table of that file (``relgrade.protocol.grades.bank_of_file``) in a fresh process
per run, two ways, interleaved A B A B:

* ``rows``: the grade rows streamed and the sidecar read as one dict per line
  (``graders.store.read_bank``), as before the column readers;
* ``columns``: both files read as Arrow columns (``io.grade_columns.read_round_columns``),
  the rules checked over them (``protocol.bank_columns``).

Each cell is CPU-seconds (user + sys, ``os.wait4``) and peak RSS in MiB of the whole
process (interpreter and imports included). Both tables are compared once for equality,
in a run of each that is not timed.
Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import sys, pickle
from pathlib import Path
from relgrade.protocol import grades
from relgrade.io.files import iter_jsonl
from relgrade.graders.store import read_bank, bank_path
from relgrade.io.grade_columns import read_round_columns
mode, path, out = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
if mode == "columns":
    cols = read_round_columns(path, bank_path(path))
    assert cols is not None, "the column readers refused the file"
    f = grades.GraderFile(rows=iter_jsonl(path), source=path.as_posix(), sha256="", round=1,
                          bank_source=bank_path(path).as_posix(), columns=cols,
                          load_bank=lambda: read_bank(path))
else:
    f = grades.GraderFile(rows=iter_jsonl(path), source=path.as_posix(), sha256="", round=1,
                          bank=read_bank(path), bank_source=bank_path(path).as_posix())
table = grades.bank_of_file(f, name="grader-a", spec={"kind": "import", "role": "grader"},
                            scale=[0, 1, 2], max_reason_words=15)
if out != "-":
    table.to_parquet(out)
"""


def write_files(folder: Path, n: int) -> Path:
    """A grade file of ``n`` rows and its sidecar under ``folder``; the grade file's path."""
    import hashlib

    from relgrade.canonical import canonical_json

    path = folder / "grader-a" / "round-1.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    rubric = hashlib.sha256(b"rubric").hexdigest()
    note = {"file": "grader-a.jsonl", "sha256": hashlib.sha256(b"file").hexdigest(),
            "format": "jsonl"}
    with path.open("w") as rows, (folder / "grader-a" / "round-1.bank.jsonl").open("w") as bank:
        for i in range(n):
            q, c = f"q{i // 37:06d}", f"c{i:08d}"
            row = {"query_id": q, "chunk_id": c, "reason": "imported", "grade": i % 3}
            line = canonical_json(row)
            rows.write(line + "\n")
            bank.write(canonical_json({
                "query_id": q, "chunk_id": c,
                "content_sha256": hashlib.sha256(c.encode()).hexdigest(),
                "intent_sha256": hashlib.sha256(q.encode()).hexdigest(),
                "rubric_version": "v1", "rubric_sha256": rubric,
                "graded_at": "2026-12-06T12:00:00Z",
                "row_sha256": hashlib.sha256(line.encode()).hexdigest(),
                "imported_from": note}) + "\n")
    return path


def measured(mode: str, path: Path, out: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(path), out], env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{mode} failed")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_336_314)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/out/bank_columns.json")
    args = ap.parse_args()
    folder = Path(args.dir or tempfile.mkdtemp(prefix="relgrade-bank-"))
    path = folder / "grader-a" / "round-1.jsonl"
    if not path.exists():
        sys.path.insert(0, str(REPO / "src"))
        write_files(folder, args.rows)
    import pandas as pd

    a, b = str(folder / "rows.parquet"), str(folder / "columns.parquet")
    measured("rows", path, a), measured("columns", path, b)  # once, for equality only
    pd.testing.assert_frame_equal(pd.read_parquet(a), pd.read_parquet(b))
    runs = {"rows": [], "columns": []}
    for _ in range(args.repeats):
        for mode in ("rows", "columns"):
            runs[mode].append(measured(mode, path, "-"))
    result = {"rows": args.rows, "load": os.getloadavg(), "runs": runs,
              "median": {m: {k: statistics.median(r[k] for r in runs[m])
                             for k in ("cpu_s", "rss_mib")} for m in runs}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result["median"], indent=1), f"load {result['load']}")


if __name__ == "__main__":
    main()
