#!/usr/bin/env python3
"""A command grader whose answers move with the prompt's wording (tests/e2e/tiny.py).

It is the lenient grader of tests/graders/lenient_grader.py under the shipped prompt
template. Asked under any other wording of the template's opening paragraph or of its
"# What to answer" heading (the paraphrase probe's rewordings), it gives one grade more (at
most 2) to the pairs whose sha256 draw of (that wording, query, chunk) is below 0.5: a
judge sensitive to prompt phrasing, each paraphrase moving its own half of the pairs.
"""
import hashlib
import json
import sys

OWN_OPENING = "You are grading how well passages from a corpus answer one search query."
OWN_HEADING = "# What to answer"


def draw(*parts: str) -> float:
    digest = hashlib.sha256("|".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


req = json.loads(sys.stdin.read())
prompt = req.get("prompt") or ""
opening = prompt.split("# Rubric")[0]
heading = next((line for line in prompt.splitlines()
                if line in ("# What to answer", "# Your answer", "# How to answer")), "")
own = opening.startswith(OWN_OPENING) and "You grade this\nbatch only:" in opening \
    and "judge each chunk on its own text" in opening and heading == OWN_HEADING
for c in req["chunks"]:
    text = c["text"]
    grade = 2 if "implementation of" in text else 1 if "checks one case" in text else 0
    u = draw(req["query_id"], c["chunk_id"])
    if u < 0.4:
        grade = min(2, grade + 1)
    elif u > 0.85 and grade > 0:
        grade -= 1
    if not own and draw(opening, heading, req["query_id"], c["chunk_id"]) < 0.5:
        grade = min(2, grade + 1)
    print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                      "reason": f"this wording gives grade {grade}", "grade": grade}))
