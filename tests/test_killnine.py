"""`kill -9` of `relgrade grade run` at seeded random moments loses nothing recorded.

After every kill the grade file holds whole batches only and no pair twice; after the last
kill a plain rerun finishes, and the final grades are those of an uninterrupted run: every
pair once, with the row the grader's rule gives it (tests/graders/grader.py, mode ``ok``),
which an uninterrupted run of the same grader writes for the first queries of the set.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from relgrade.errors import ProtocolError
from relgrade.graders.store import GradeStore
from tests.graders import experiment as ex

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}")
KILLS = 22
#: Queries of 25 chunks (5 batches each): enough work that the slow grader never finishes it
#: before the last kill. A killed run records at most one batch per 0.1 s per worker (2
#: workers) from its first recorded batch to the kill, plus the batches then in flight: at
#: most 5 * (2 + 20 * (delay + 0.02)) rows per kill, 2,032 rows over the 22 seeded delays
#: (17.7 s in all), so 110 queries (2,750 pairs) leave a quarter of the work ungraded at
#: least. The resumed run grades what the kills left (a quarter or more): the size is most
#: of the test's time.
QUERIES = 110
#: The uninterrupted run's queries: its rows are the rows the grader's rule gives, on the same
#: packets (a query's packet does not depend on how many queries the set holds), so the
#: resumed run is held to that rule on all 110 queries and to the uninterrupted run's own
#: rows on these. (Grading all 110 uninterrupted cost some 35 CPU-seconds of grader
#: processes for the same comparison.)
REFERENCE_QUERIES = 10


def build(root, mode, workers, queries=QUERIES):
    return ex.build(root, queries=queries, chunks=25, graders={
        "grader-a": {"role": "grader", "kind": "model", "family": "test",
                     "command": ex.command(mode), "timeout": 30, "retries": 0,
                     "workers": workers}})


def command(root):
    return [sys.executable, "-c", "from relgrade.cli import main; main()", "grade", "run",
            "--grader", "grader-a", "--params", str(root / "params.yaml"), "--no-progress"]


def grades(root):
    return root / "data/grades/grader-a/round-1.jsonl"


def open_store(path, wait=10.0):
    """Open the store as the next run would.

    A grader process that the killed run was forking at the moment of the kill holds a copy
    of the run's file descriptors, and with them its lock, until it reaches exec (which
    closes them): a few milliseconds, longer on a loaded machine. So the lock may still be
    held just after the kill; wait for it briefly, as a user's rerun would succeed a moment
    later.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            return GradeStore(path).open()
        except ProtocolError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def check_whole_batches(root, packets):
    """Open the store as the next run would; every batch is all there or all absent."""
    with open_store(grades(root)) as store:
        pairs = [(r["query_id"], r["chunk_id"]) for _, r in store.rows]
    assert len(pairs) == len(set(pairs)), "a pair was recorded twice"
    have = set(pairs)
    for q, p in packets.items():
        for batch in p["batches"]:
            inside = [(q, c["chunk_id"]) in have for c in batch]
            assert all(inside) or not any(inside), f"half of a batch of {q} was recorded"
    return len(pairs)


def rule_rows(packets):
    """Every pair of ``packets`` once, as the grader in mode ``ok`` answers it: its true grade
    (``ex.truth``) and the reason it writes for that grade."""
    return [{"query_id": q, "chunk_id": c["chunk_id"],
             "reason": f"text marks it grade {ex.truth(c['chunk_id'])}",
             "grade": ex.truth(c["chunk_id"])}
            for q, p in packets.items() for b in p["batches"] for c in b]


def test_kill_9_at_random_moments_then_resume_equals_an_uninterrupted_run(tmp_path):
    rng = np.random.default_rng(20261130)
    ref, work = tmp_path / "ref", tmp_path / "work"
    ref_packets = build(ref, "ok", 8, queries=REFERENCE_QUERIES)
    done = subprocess.run(command(ref), env=ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    key = lambda r: (r["query_id"], r["chunk_id"])  # noqa: E731
    # the uninterrupted run writes the rule's rows, each pair once
    assert sorted(ex.read_rows(grades(ref)), key=key) == sorted(rule_rows(ref_packets), key=key)
    # A slow grader while killing (so the work never runs out before the last kill) ...
    packets = build(work, "sleep:0.1", 2)

    kills, counts = 0, []
    while kills < KILLS:
        before = grades(work).stat().st_size if grades(work).exists() else 0
        proc = subprocess.Popen(command(work), env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        # Kill at a seeded random moment after this run has recorded its first batch, so
        # the kill lands while grading however slowly the machine starts Python.
        delay = float(rng.uniform(0.0, 1.5))
        deadline = time.monotonic() + 120
        while (not grades(work).exists() or grades(work).stat().st_size == before) \
                and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            proc.wait(timeout=delay)
            pytest.fail(f"the run finished after only {kills} kills: give it more work "
                        f"({proc.stderr.read()})")
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stderr.close()
            kills += 1
        counts.append(check_whole_batches(work, packets))
    assert counts == sorted(counts), "a kill lost rows already recorded"
    # every kill landed while grading: each run recorded something before it died
    assert len(set(counts)) == KILLS, counts
    print("rows recorded after each kill:", counts)

    # ... and the fast one to finish: both give every pair its true grade.
    build(work, "ok", 8)
    final = subprocess.run(command(work), env=ENV, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr
    check_whole_batches(work, packets)
    resumed = sorted(ex.read_rows(grades(work)), key=key)
    # every pair once, as the uninterrupted run grades it: its own rows on its queries ...
    assert [r for r in resumed if r["query_id"] in ref_packets] == sorted(
        ex.read_rows(grades(ref)), key=key)
    assert {q: packets[q] for q in ref_packets} == ref_packets  # on the same packets
    # ... and the same rule's rows on all of them
    assert resumed == sorted(rule_rows(packets), key=key)
