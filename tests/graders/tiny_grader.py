#!/usr/bin/env python3
"""A command grader for the tiny end-to-end experiment (tests/e2e/tiny.py).

It grades by the chunk text as the packet shows it: an implementation → 2, a test that
checks one case → 1, anything else → 0 — the fixture's truth table, read from the text.

With the environment variable ``TINY_GRADER_LENIENT_ON`` naming a file of ``query_id
chunk_id`` lines, it grades those pairs 2 whatever their text: a judge whose bias differs on
some pairs (say, a new arm's holes) from its bias elsewhere.
"""
import json
import os
import sys

lenient = set()
if os.environ.get("TINY_GRADER_LENIENT_ON"):
    with open(os.environ["TINY_GRADER_LENIENT_ON"]) as f:
        lenient = {tuple(line.split()) for line in f if line.strip()}
req = json.loads(sys.stdin.read())
for c in req["chunks"]:
    text = c["text"]
    grade = 2 if "implementation of" in text else 1 if "checks one case" in text else 0
    if (req["query_id"], c["chunk_id"]) in lenient:
        grade = 2
    # extra arguments are said in the reason (a second round's grader words it its own way)
    said = " ".join(["the text reads as grade", str(grade), *sys.argv[1:]])
    print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                      "reason": said, "grade": grade}))
