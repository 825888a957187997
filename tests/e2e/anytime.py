"""The two-arm ppi experiment the end-to-end tests of the stopping rule
(`grading.stop: anytime`) build with `relgrade init`.

Arms: ``good`` ranks each topic's answer and pointer first (on kw01 and qu01 the pointer
first), ``poor`` ranks the two near misses first. The key grader ``model-m`` is the lenient
model grader (tests/graders/lenient_grader.py); the human grader is ``person-h``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e import tiny

GRADERS = Path(__file__).resolve().parents[1] / "graders"
#: The key grader's command: a lenient model grader.
MODEL = f"{sys.executable} {GRADERS / 'lenient_grader.py'}"
#: A human grader that grades by the fixture's truth (tests/graders/tiny_grader.py).
PEOPLE = f"{sys.executable} {GRADERS / 'tiny_grader.py'}"


def write_runs(root: Path) -> None:
    """The runs of ``good`` and ``poor`` under ``root/data/input/runs``."""
    inp = root / "data/input/runs"
    with open(inp / "good.trec", "w") as g, open(inp / "poor.trec", "w") as p:
        for qid, *_ in tiny.TOPICS:
            first = (["pointer", "answer"] if qid.endswith("01") else ["answer", "pointer"])
            for r, kind in enumerate(first + ["miss1", "miss2"], 1):
                g.write(f"{qid} Q0 {qid}-{kind} {r} {10 - r} good\n")
            for r, kind in enumerate(["miss1", "miss2", "pointer", "answer"], 1):
                p.write(f"{qid} Q0 {qid}-{kind} {r} {10 - r} poor\n")


def init(root: Path, exp: str, *, auditor_command: str | None = None):
    """`relgrade init EXP --mode ppi` over the two arms, every query in the human sample;
    ``auditor_command`` gives ``person-h`` a command (else people grade by import)."""
    write_runs(root)
    extra = ["--auditor-command", auditor_command] if auditor_command else []
    return tiny.run(root, "relgrade", "init", exp, "--corpus", "data/input/chunks.jsonl",
                    "--queries", "data/input/queries.tsv", "--intents",
                    "data/input/intents.tsv", "--run", "good=data/input/runs/good.trec",
                    "--run", "poor=data/input/runs/poor.trec", "--baseline", "poor",
                    "--pool-depth", "4", "--grader", "model-m", "--grader-command", MODEL,
                    "--auditor", "person-h", *extra, "--mode", "ppi",
                    "--human-fraction", "1.0")
