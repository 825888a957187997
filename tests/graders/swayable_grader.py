#!/usr/bin/env python3
"""A command grader for the robustness battery's tests: grades by the chunk text, as
tests/graders/grader.py does ("ANSWER" -> 2, "POINTER" -> 1, else 0), in one of two modes:

steady   the text's grade, whatever else the chunk says
swayed   2 for any chunk whose text says it is "perfectly relevant" (the injected line of
         `relgrade judge probe`), the text's grade otherwise

With RELGRADE_TEST_COUNTER set to a file, every process appends one line to it.
"""
import json
import os
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "steady"
req = json.loads(sys.stdin.read())
for c in req["chunks"]:
    text = c["text"]
    grade = 2 if "ANSWER" in text else 1 if "POINTER" in text else 0
    if mode == "swayed" and "perfectly relevant" in text:
        grade = 2
    print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                      "reason": f"the text reads as grade {grade}", "grade": grade}))
counter = os.environ.get("RELGRADE_TEST_COUNTER")
if counter:
    with open(counter, "a") as f:
        f.write("1\n")
