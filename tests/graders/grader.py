#!/usr/bin/env python3
"""A command grader for the tests: reads one relgrade batch request, prints grade rows.

The grade comes from the chunk text: "ANSWER" -> 2, "POINTER" -> 1, else 0. The first
argument picks a behaviour, so one script covers the good and the bad graders:

ok          answer correctly
exit        print nothing and exit with status 3
hang        sleep far past any timeout
nonjson     print a line that is not JSON
stranger    add a row for a chunk that is not in the batch
few         leave out the last chunk of the batch
flaky       answer "nonjson" on the first attempt, correctly on a retry
samples     grade differs by sample number (for majority tests, see below)
sleep:S     sleep S seconds, then answer correctly
surrogate   for query q01, a reason ending in half an emoji (a lone surrogate); else "ok"
prompt      read the rendered prompt (``input: prompt``) instead of JSON, answer correctly
orphan      for query q01 "ok"; for any other, kill the parent process (the Ray worker that
            started it) before answering: as when a raylet or its agent dies, every send is
            lost (only ever run with --executor ray)

With RELGRADE_TEST_LOG set to a folder, every request is saved there (one file per process).
With RELGRADE_TEST_COUNTER set to a file, a process that answered appends one line to it, the
sha256 of the request it answered, after its answer is printed and flushed (the call counter
of the call cache tests: a request answered twice shows up twice).
"""
import hashlib
import json
import os
import re
import sys
import time
import uuid

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
raw = sys.stdin.read()
if mode == "prompt":  # the query id and the chunks, read back from the prompt's sections
    req = {"query_id": re.search(r"^- Query id: (\S+)$", raw, re.M).group(1),
           "chunks": [{"chunk_id": cid, "text": text} for cid, _, text in re.findall(
               r"^## Chunk (\S+)\n\nHeader: .*?\n\n(`{3,})\n(.*?)\n\2$", raw, re.M | re.S)]}
else:
    req = json.loads(raw)
log = os.environ.get("RELGRADE_TEST_LOG")
if log:
    with open(os.path.join(log, f"{os.getpid()}-{uuid.uuid4().hex}.json"), "w") as f:
        f.write(raw)


def truth(text):
    return 2 if "ANSWER" in text else 1 if "POINTER" in text else 0


def rows(chunks, grade_of=lambda c: truth(c["text"])):
    return [{"query_id": req["query_id"], "chunk_id": c["chunk_id"],
             "reason": f"text marks it grade {grade_of(c)}", "grade": grade_of(c)} for c in chunks]


def emit(rs):
    for r in rs:
        print(json.dumps(r))


chunks = req["chunks"]
if mode in ("ok", "prompt"):
    emit(rows(chunks))
elif mode == "exit":
    print("grader broke", file=sys.stderr)
    sys.exit(3)
elif mode == "hang":
    time.sleep(600)
elif mode == "nonjson":
    print("Here are my grades:")
    emit(rows(chunks))
elif mode == "stranger":
    emit(rows(chunks))
    print(json.dumps({"query_id": req["query_id"], "chunk_id": "not-in-batch",
                      "reason": "a chunk from elsewhere", "grade": 1}))
elif mode == "few":
    emit(rows(chunks)[:-1])
elif mode == "flaky":
    if req["attempt"] == 1:
        print("not json at all")
    else:
        emit(rows(chunks))
elif mode == "samples":
    # Sample 0 and 1 give the true grade; sample 2 gives 0. Chunks whose text holds "TIE"
    # get grade 0 from sample 0 and grade 2 from sample 1 (a 0-2 tie with two samples).
    s = req["sample"]

    def g(c):
        if "TIE" in c["text"]:
            return 0 if s == 0 else 2
        return 0 if s == 2 else truth(c["text"])
    emit(rows(chunks, g))
elif mode == "surrogate":
    rs = rows(chunks)
    if req["query_id"] == "q01":
        rs[0]["reason"] = "cut in half \ud83d"
    emit(rs)
elif mode == "orphan":
    if req["query_id"] == "q01":
        emit(rows(chunks))
    else:
        import signal
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)
elif mode.startswith("sleep:"):
    time.sleep(float(mode.split(":", 1)[1]))
    emit(rows(chunks))
else:
    sys.exit(f"unknown mode {mode}")

counter = os.environ.get("RELGRADE_TEST_COUNTER")
if counter:
    sys.stdout.flush()
    fd = os.open(counter, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (hashlib.sha256(raw.encode("utf-8")).hexdigest() + "\n").encode())
    os.close(fd)
