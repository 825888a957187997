#!/usr/bin/env python3
"""Write the simulated crowd experiment's inputs: chunks, queries, intents and the truth.

Every chunk and every grade here is simulated: eight topics about a made-up job scheduler,
eight chunks per topic (three that answer the query: truth 2, three that point at the answer:
truth 1, two that mention the topic words only: truth 0). A chunk is graded 0 for every
query but its own topic's. Run: python sim/make_inputs.py
"""
import csv
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
INPUT = HERE.parent / "data" / "input"

TOPICS = [
    ("q01", "keyword", "retry backoff", "How does the scheduler compute the delay before retrying a failed job?"),
    ("q02", "keyword", "cron parser", "Where are cron expressions parsed into schedules?"),
    ("q03", "keyword", "worker heartbeat", "How does a worker report that it is still alive?"),
    ("q04", "keyword", "queue priority", "How are jobs with a higher priority taken first?"),
    ("q05", "question", "Why are jobs leased instead of locked?", "Why does the scheduler lease jobs to workers rather than lock them?"),
    ("q06", "question", "Where is the job timeout enforced?", "Where does the scheduler stop a job that runs past its timeout?"),
    ("q07", "question", "How are results stored after a job finishes?", "How and where are a finished job's results written?"),
    ("q08", "question", "Which signals stop a worker gracefully?", "Which operating-system signals make a worker stop after its current job?"),
]

KINDS = [("impl", 2), ("impl", 2), ("impl", 2), ("ref", 1), ("ref", 1), ("ref", 1),
         ("miss", 0), ("miss", 0)]


def chunk(qid, topic, intent, kind, i):
    words = topic.replace("?", "").lower().split()
    key = " ".join(words[-2:])
    if kind == "impl":
        text = (f"def handle_{key.replace(' ', '_')}_{i}(job):\n"
                f"    # {intent} This function is the implementation of {key}, part {i}.\n"
                f"    return apply_{key.replace(' ', '_')}(job, step={i})")
        header = f"scheduler/{key.replace(' ', '_')}.py > handle_{i}"
    elif kind == "ref":
        text = (f"See the {key} module for details; this test calls {key} once and checks "
                f"one case of it (case {i}).")
        header = f"tests/test_{key.replace(' ', '_')}.py > test_case_{i}"
    else:
        text = (f"Changelog entry {i}: the word {words[0]} was renamed in the docs index; "
                "nothing else about it changed.")
        header = f"CHANGES.md > {qid} entry {i}"
    # opaque ids: nothing in an id says the topic or the truth
    cid = "c" + hashlib.sha256(f"crowd-sim|{qid}|{kind}|{i}".encode()).hexdigest()[:12]
    return {"chunk_id": cid, "header": header, "text": text,
            "source": header.split(" > ")[0]}


def main():
    INPUT.mkdir(parents=True, exist_ok=True)
    chunks, truth = [], []
    for qid, _, query, intent in TOPICS:
        for i, (kind, grade) in enumerate(KINDS):
            c = chunk(qid, query, intent, kind, i)
            chunks.append(c)
            truth.append((qid, c["chunk_id"], grade))
    with open(INPUT / "chunks.jsonl", "w", encoding="utf-8") as f:
        for c in chunks:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    with open(INPUT / "queries.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["query_id", "query", "group"])
        for qid, group, query, _ in TOPICS:
            w.writerow([qid, query, group])
    with open(INPUT / "intents.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["query_id", "query", "intent"])
        for qid, _, query, intent in TOPICS:
            w.writerow([qid, query, intent])
    with open(INPUT / "truth.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["query_id", "chunk_id", "grade"])
        w.writerows(truth)


if __name__ == "__main__":
    main()
