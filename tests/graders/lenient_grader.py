#!/usr/bin/env python3
"""A lenient command grader for the tiny end-to-end experiment (tests/e2e/tiny.py).

It reads the fixture's truth from the text as tests/graders/tiny_grader.py does, then errs
on purpose, reproducibly: a pair whose sha256 draw (of the query and chunk ids) is below
0.4 gets one grade more (at most 2), and a relevant pair whose draw is above 0.85 gets one
grade less. It stands in for a biased model grader of the prediction-powered mode.
"""
import hashlib
import json
import sys

req = json.loads(sys.stdin.read())
for c in req["chunks"]:
    text = c["text"]
    grade = 2 if "implementation of" in text else 1 if "checks one case" in text else 0
    digest = hashlib.sha256(f"{req['query_id']}|{c['chunk_id']}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < 0.4:
        grade = min(2, grade + 1)
    elif u > 0.85 and grade > 0:
        grade -= 1
    print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                      "reason": f"lenient reading gives grade {grade}", "grade": grade}))
