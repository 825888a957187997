"""A tiny grading set-up written straight into a folder: params, rubric, packets, audit.

The tests of `relgrade grade run`, `relgrade serve` and the Label Studio import build it in
``tmp_path`` instead of running the pipeline. Chunk text decides the true grade (see
``grader.py``): "ANSWER" → 2, "POINTER" → 1, anything else → 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

GRADER = Path(__file__).with_name("grader.py")
INTENTS_SHA = "a" * 64


def command(mode: str = "ok") -> list[str]:
    """The argv of the test grader in one of its modes."""
    return [sys.executable, str(GRADER), mode]


def chunk(qid: str, j: int) -> dict:
    kind = ("ANSWER", "POINTER", "plain")[j % 3]
    return {"chunk_id": f"{qid}-c{j}", "header": f"src/pkg/mod_{j}.py › def f{j}",
            "text": f"def f{j}():\n    # {kind} text for {qid}\n    return {j}\n"}


def truth(chunk_id: str) -> int:
    j = int(chunk_id.rsplit("-c", 1)[1])
    return (2, 1, 0)[j % 3]


def packet(qid: str, n_chunks: int, *, batch_size: int = 5, reverse: bool = False,
           text_of=None) -> dict:
    chunks = [chunk(qid, j) for j in range(n_chunks)]
    if text_of:
        for c in chunks:
            c["text"] = text_of(c) or c["text"]
    if reverse:
        chunks = chunks[::-1]
    batches = [chunks[i:i + batch_size] for i in range(0, len(chunks), batch_size)]
    return {"query_id": qid, "query": f"where is f for {qid}",
            "intent": f"Find the definition of the function f that {qid} asks about.",
            "rubric_version": "v1", "intents_sha256": INTENTS_SHA, "round": 1,
            "batches": batches}


def build(root: Path, *, queries: int = 4, chunks: int = 7, audit: int = 2,
          graders: dict | None = None, batch_size: int = 5, text_of=None,
          rubric: str | None = None, paths: dict | None = None) -> dict:
    """Write params.yaml, the rubric and both roles' packets under ``root``.

    Returns the grader packets (query id → packet).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    qids = [f"q{i:02d}" for i in range(1, queries + 1)]
    params = {
        "seed": 7,
        "paths": {"packets": "data/packets", "grades_in": "data/grades",
                  "audit": "data/audit/audit.jsonl", "pool": "data/pool/pool.parquet",
                  **(paths or {})},
        "scale": {"grades": [0, 1, 2], "relevant_min": 1},
        "grading": {"rubric": "rubric/v1.md", "rubric_version": "v1", "round": 1,
                    "batch_size": batch_size, "max_reason_words": 15},
        "graders": graders or {
            "grader-a": {"role": "grader", "kind": "model", "family": "test",
                         "command": command("ok"), "timeout": 20, "retries": 1},
        },
    }
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / "rubric").mkdir(parents=True, exist_ok=True)
    (root / "rubric/v1.md").write_text(rubric or (
        "version: v1\n\n# Grading rubric\n\n| grade | meaning |\n|---|---|\n"
        "| 2 | Answers it |\n| 1 | Helps |\n| 0 | Does not help |\n\n"
        "Judge each chunk against the intent line alone.\n"))
    out = {}
    for role, ids in (("grader", qids), ("auditor", qids[:audit])):
        folder = root / "data/packets" / role
        folder.mkdir(parents=True, exist_ok=True)
        for qid in ids:
            p = packet(qid, chunks, batch_size=batch_size, reverse=(role == "auditor"),
                       text_of=text_of)
            (folder / f"{qid}.json").write_text(json.dumps(p))
            if role == "grader":
                out[qid] = p
    audit_file = root / "data/audit/audit.jsonl"
    audit_file.parent.mkdir(parents=True, exist_ok=True)
    audit_file.write_text("".join(json.dumps({"query_id": q, "group": "keyword",
                                              "unique_share": 0.5, "reason": "test"}) + "\n"
                                  for q in qids[:audit]))
    return out


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
