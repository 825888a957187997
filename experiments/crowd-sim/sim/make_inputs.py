#!/usr/bin/env python3
"""Write the simulated crowd experiment's inputs: chunks, the query log and the truth.

Every chunk, query count and grade here is simulated: eight topics about a made-up job
scheduler, eight chunks per topic (three that answer the topic: truth 2, three that point at
the answer: truth 1, two that mention the topic words only: truth 0). The query log holds
three phrasings of each topic (the topic's own query and two others, 24 distinct queries),
each answered by its topic's chunks; a chunk is 0 for every query of another topic. Counts
follow a Zipf curve (count ~ 600 / rank) over a seeded shuffle of the 24 queries, with a
seeded multiplicative jitter, so the log has a head of a few frequent queries and a long
tail. The truth (`truth.tsv`) covers every log query, keyed by the query id the sample stage
gives it (relgrade.query_sampling.query_id of the normalised text), so whichever queries the
sample draws, the simulated graders know their truth. The intents are written after the
sample by `sim/make_intents.py`. Run from the repository: python experiments/crowd-sim/sim/make_inputs.py
"""
import csv
import hashlib
import json
from pathlib import Path

import numpy as np

from relgrade.query_sampling import normalize_query, query_id

HERE = Path(__file__).resolve().parent
INPUT = HERE.parent / "data" / "input"
#: The seed of the log's counts (query order and jitter).
LOG_SEED = 20261201

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

# Two more phrasings per topic (the topic's own query is the first): what else users type
# when they want the same answer.
PHRASINGS = {
    "q01": ["retry delay", "backoff for a failed job"],
    "q02": ["parse cron expressions", "cron schedules"],
    "q03": ["heartbeat", "is the worker still alive"],
    "q04": ["higher priority jobs", "job priority first"],
    "q05": ["lease jobs to workers", "job lease lock"],
    "q06": ["job timeout", "stop a job past its timeout"],
    "q07": ["job results written", "finished job results"],
    "q08": ["worker signals", "stop worker gracefully"],
}

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


def log_queries():
    """Every log query as (text, topic id, intent), topic by topic."""
    return [(text, topic, intent) for topic, _, query, intent in TOPICS
            for text in [query, *PHRASINGS[topic]]]


def log_counts(n):
    """Seeded Zipf counts: the query at position i of a seeded shuffle gets about 600 / rank."""
    rng = np.random.default_rng(LOG_SEED)
    rank = np.empty(n, dtype=int)
    rank[rng.permutation(n)] = np.arange(1, n + 1)
    jitter = rng.uniform(0.8, 1.25, size=n)
    return np.maximum(1, np.rint(600 / rank * jitter)).astype(int)


def main():
    INPUT.mkdir(parents=True, exist_ok=True)
    chunks, answers = [], {}
    for qid, _, query, intent in TOPICS:
        answers[qid] = []
        for i, (kind, grade) in enumerate(KINDS):
            c = chunk(qid, query, intent, kind, i)
            chunks.append(c)
            answers[qid].append((c["chunk_id"], grade))
    with open(INPUT / "chunks.jsonl", "w", encoding="utf-8") as f:
        for c in chunks:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    queries = log_queries()
    counts = log_counts(len(queries))
    with open(INPUT / "query-log.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["query", "count"])
        for (text, _, _), count in sorted(zip(queries, counts), key=lambda x: -x[1]):
            w.writerow([text, int(count)])
    with open(INPUT / "truth.tsv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["query_id", "chunk_id", "grade"])
        for text, topic, _ in queries:
            qid = query_id(normalize_query(text))
            w.writerows((qid, cid, grade) for cid, grade in answers[topic])


if __name__ == "__main__":
    main()
