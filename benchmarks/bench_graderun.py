"""Grading at scale: what `relgrade grade run` costs per pair, and how the web page renders.

    python benchmarks/bench_graderun.py [--pairs 20000] [--workers 1 2 4 8] [--sleep 0.1]

Three measurements, all on synthetic packets of 20 chunks per query (four batches of five):

1. Orchestration overhead per pair with an *instant* grader, at 1, 2, 4 and 8 workers, on a
   pool of ``--pairs`` pairs. Two variants:

   * in-process: the grader's answer is computed inside the runner instead of a process, so
     the time is relgrade's own work per batch (request and prompt, validation of the answer,
     hand-off to the single writer, one append with its two fsyncs);
   * real process: a minimal Python grader (``python -S``, parse the request, print the
     rows) started per batch, as in production. Its own cost is measured alone (serially,
     same request) and reported beside it; the overhead is wall time minus that cost.

2. Speed-up while the grader is the bottleneck: a grader that sleeps ``--sleep`` seconds per
   batch, on a smaller pool, at the same worker counts.

3. Web page: server-side render time of one batch page with five 200-line chunks (Pygments
   highlighting, the rubric panel), first render and cached, through FastAPI's test client.

Everything is written under a temporary folder (real files, real fsync).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from relgrade.cli.graderun import prompt_template
from relgrade.graders import command as graderun
from relgrade.graders.store import GradeStore, SingleWriter

INSTANT = r'''
import json, sys
req = json.loads(sys.stdin.buffer.read())
out = []
for c in req["chunks"]:
    out.append(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                           "reason": "states the answer in full", "grade": 1}))
sys.stdout.write("\n".join(out) + "\n")
'''

SLEEPY = r'''
import json, sys, time
req = json.loads(sys.stdin.buffer.read())
time.sleep(float(sys.argv[1]))
for c in req["chunks"]:
    print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                      "reason": "states the answer in full", "grade": 1}))
'''

RUBRIC = "# Rubric\n\n" + "Grade each chunk against the intent line alone.\n" * 40

CODE_LINE = "    value = compute_something(ctx, items[{i}], key={i!r})  # line {i}\n"


def packets(n_pairs: int, per_query: int = 20, lines: int = 6) -> dict:
    out = {}
    for q in range(n_pairs // per_query):
        qid = f"q{q:05d}"
        chunks = [{"chunk_id": f"{qid}-c{j:02d}", "header": f"src/pkg/mod_{j}.py › def f{j}",
                   "text": "def f():\n" + "".join(CODE_LINE.format(i=i) for i in range(lines))}
                  for j in range(per_query)]
        out[qid] = {"query_id": qid, "query": f"where is f for {qid}",
                    "intent": "Find the definition of f.", "rubric_version": "v1",
                    "intents_sha256": "a" * 64, "round": 1,
                    "batches": [chunks[i:i + 5] for i in range(0, per_query, 5)]}
    return out


class InProcessRunner(graderun.ProcessRunner):
    """Answers a request without starting a process (relgrade's own cost only)."""

    def run(self, argv, data, *, timeout):
        t0 = time.perf_counter()
        req = json.loads(data)
        out = "".join(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                                  "reason": "states the answer in full", "grade": 1}) + "\n"
                      for c in req["chunks"])
        return graderun.CommandResult(0, out, "", time.perf_counter() - t0)


def timed_run(pk, argv, workers, folder: Path, *, in_process=False) -> float:
    setup = graderun.GraderSetup(name="bench", role="grader", kind="model", argv=tuple(argv),
                                 timeout=60, retries=0, workers=workers)
    path = folder / f"w{workers}-{'inproc' if in_process else 'proc'}-{time.time_ns()}.jsonl"
    original = graderun.ProcessRunner
    if in_process:
        graderun.ProcessRunner = InProcessRunner
    try:
        with GradeStore(path).open() as store:
            t0 = time.perf_counter()
            s = graderun.run_grader(pk, setup=setup, store=store, rubric=RUBRIC,
                                    scale=[0, 1, 2], max_reason_words=15,
                                    template=prompt_template())
            wall = time.perf_counter() - t0
    finally:
        graderun.ProcessRunner = original
    n = sum(len(b) for p in pk.values() for b in p["batches"])
    if s.graded != n or s.failures:
        raise SystemExit(f"benchmark run incomplete: {s}")
    return wall, s.command_seconds


def grader_alone(argv, pk, repeat=200) -> float:
    """Seconds per invocation of the grader command alone, serially."""
    p = next(iter(pk.values()))
    from relgrade.graders.exchange import batch_request, encode_request, render_prompt
    req = batch_request(p, 0, p["batches"][0], grader="bench", rubric=RUBRIC, scale=[0, 1, 2],
                        max_reason_words=15)
    req["prompt"] = render_prompt(prompt_template(), req)
    data = encode_request(req)
    t0 = time.perf_counter()
    for _ in range(repeat):
        subprocess.run(argv, input=data, capture_output=True, check=True)
    return (time.perf_counter() - t0) / repeat


def bench_web(tmp: Path, repeat: int) -> dict:
    from fastapi.testclient import TestClient

    from relgrade.web.app import Site, WebGrader, create_app

    pk = packets(5, per_query=5, lines=200)
    qid = next(iter(pk))
    store = GradeStore(tmp / "web.jsonl").open()
    writer = SingleWriter()
    site = Site(graders={"alice": WebGrader("alice", "grader", "human", "t0ken-bench",
                                            {qid: pk[qid]}, store)},
                rubric=RUBRIC, scale=[0, 1, 2], max_reason_words=15, writer=writer)
    client = TestClient(create_app(site))
    client.get("/login?token=t0ken-bench")
    url = f"/g/alice/q/{qid}/0"
    t0 = time.perf_counter()
    r = client.get(url)
    first = time.perf_counter() - t0
    assert r.status_code == 200 and r.text.count('<article class="chunk') == 5
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        client.get(url)
        times.append(time.perf_counter() - t0)
    writer.close()
    store.close()
    return {"first_ms": first * 1e3, "cached_median_ms": statistics.median(times) * 1e3,
            "bytes": len(r.content)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--sleep", type=float, default=0.1, help="seconds the slow grader sleeps")
    ap.add_argument("--sleep-pairs", type=int, default=400)
    ap.add_argument("--web-repeat", type=int, default=50)
    args = ap.parse_args()

    print(f"# {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "instant.py").write_text(INSTANT)
        (tmp / "sleepy.py").write_text(SLEEPY)
        instant = [sys.executable, "-S", str(tmp / "instant.py")]
        pk = packets(args.pairs)
        n_batches = sum(len(p["batches"]) for p in pk.values())
        alone = grader_alone(instant, pk)
        print(f"\n## 1. instant grader, {args.pairs} pairs ({n_batches} batches)")
        print(f"grader process alone (serial, subprocess.run): {alone * 1e3:.2f} ms per batch "
              f"= {alone / 5 * 1e3:.2f} ms per pair")
        print("| workers | relgrade alone (in-process grader) ms/pair | real process: wall "
              "ms/pair | in grader processes ms/pair (summed) | wall minus grader time "
              "ms/pair (1 worker only) | pairs/s |")
        print("|---:|---:|---:|---:|---:|---:|")
        for w in args.workers:
            inproc = timed_run(pk, instant, w, tmp, in_process=True)[0] / args.pairs
            wall, in_cmd = timed_run(pk, instant, w, tmp)
            real, cmd = wall / args.pairs, in_cmd / args.pairs
            gap = f"{(real - cmd) * 1e3:.3f}" if w == 1 else "-"
            print(f"| {w} | {inproc * 1e3:.3f} | {real * 1e3:.3f} | {cmd * 1e3:.3f} | {gap} | "
                  f"{1 / real:.0f} |")

        sleepy = [sys.executable, "-S", str(tmp / "sleepy.py"), str(args.sleep)]
        spk = packets(args.sleep_pairs)
        nb = sum(len(p["batches"]) for p in spk.values())
        print(f"\n## 2. grader sleeping {args.sleep} s per batch, {args.sleep_pairs} pairs "
              f"({nb} batches)")
        print("| workers | wall s | speed-up | ideal |")
        print("|---:|---:|---:|---:|")
        base = None
        for w in args.workers:
            wall = timed_run(spk, sleepy, w, tmp)[0]
            base = base or wall
            print(f"| {w} | {wall:.2f} | {base / wall:.2f}x | {w}x |")

        web = bench_web(tmp, args.web_repeat)
        print("\n## 3. batch page with five 200-line chunks")
        print(f"first render {web['first_ms']:.1f} ms; cached render median "
              f"{web['cached_median_ms']:.1f} ms over {args.web_repeat}; {web['bytes']} bytes")


if __name__ == "__main__":
    main()
