"""A ``kill -9`` loop against ``relgrade grade run --executor ray``: its driver, its Ray
workers and the grader processes under them.

Used by ``tests/test_ray_killnine.py`` (a few kills) and ``benchmarks/killnine_ray.py`` (at
least 20). The cluster is real Ray on loopback; each driver is a separate
``relgrade grade run --executor ray --address ADDRESS`` process, started again after it is
killed (or after it exits), until a last run completes.

What is counted
---------------
* The grader command (:data:`GRADER`) is a fresh Python process per batch that appends
  ``start SHA PID QUERY:BATCH:ATTEMPT`` to a counter file as it reads its request, sleeps (the seconds in a pace
  file, so the loop can make it slow and the last run fast without changing the command, the
  cache key's identity), prints its rows, flushes, and appends ``done ...``; both
  appends are ``flock``-ed. ``SHA`` is the sha256 of the request's bytes, one-to-one with the
  call cache key (the command, hence the identity, never changes).
* The driver's report of each saved batch is its progress callback (called after the single
  writer acknowledged the batch as on disk); :data:`DRIVER` runs the ordinary command line
  with that callback printing ``saved N`` to standard output instead of drawing a bar.
* After every driver's end the grade store is opened as the next run opens it (recovering
  an interrupted append) and checked: no pair twice, every row of the last check still
  there, at least as many new rows as the driver reported saved, the bank sidecar in step.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from relgrade.errors import ProtocolError
from relgrade.graders.command import RUN_MARKER
from relgrade.graders.store import GradeStore, read_bank
from relgrade.protocol.sidecar import row_sha256
from tests.graders import experiment as ex

#: The grader command's script (see the module docstring).
GRADER = r'''
import fcntl, hashlib, json, os, sys, time
raw = sys.stdin.buffer.read()
sha = hashlib.sha256(raw).hexdigest()

req = json.loads(raw)
batch = f"{req['query_id']}:{req['batch']}:{req['attempt']}"


def note(what):
    with open(sys.argv[1], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(f"{what} {sha} {os.getpid()} {batch}\n")
        f.flush()


note("start")
try:
    with open(sys.argv[2]) as f:
        time.sleep(float(f.read()))
except (OSError, ValueError):
    pass
for c in req["chunks"]:
    g = 2 if "ANSWER" in c["text"] else 1 if "POINTER" in c["text"] else 0
    print(json.dumps({"query_id": req["query_id"], "chunk_id": c["chunk_id"],
                      "reason": f"text marks it grade {g}", "grade": g}))
sys.stdout.flush()
note("done")
'''

#: ``relgrade grade run`` with its progress callback printing ``saved N`` per saved batch.
DRIVER = r'''
import sys
from relgrade.cli import graderun, main


class SavedReport:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *args, **kwargs):
        return 0

    def update(self, *args, **kwargs):
        pass

    def advance(self, task, n):
        sys.stdout.write(f"saved {n}\n")
        sys.stdout.flush()


graderun._progress_bar = lambda enabled: SavedReport()
main()
'''

KINDS = ("driver", "worker", "grader")


@dataclass
class Outcome:
    """What a kill loop did and found."""

    kills: Counter = field(default_factory=Counter)
    runs: int = 0
    pairs: int = 0
    recorded: int = 0
    duplicates: int = 0
    lost: int = 0  # rows recorded (or reported saved) at one check and missing later
    torn_seen: int = 0  # grade files found with an interrupted append (recovered on open)
    torn_left: int = 0  # lines that do not parse after recovery
    bank_mismatches: int = 0
    acked: int = 0  # pairs the drivers reported saved
    starts: int = 0  # grader processes that read a request
    answers: int = 0  # grader processes that printed a whole answer, not killed after
    sent_twice: int = 0  # requests (by sha256) read by more than one grader process
    resent_after_answer: int = 0  # processes that read a request already answered (and kept)
    answered_twice: int = 0  # requests (by sha256) answered by more than one process (kept)
    batches_answered_twice: int = 0  # batches answered again under another attempt's request
    spool_left: int = 0
    spool_files: list = field(default_factory=list)  # (name, bytes) of each left
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    killed: list = field(default_factory=list)  # (kind, pid) of every kill
    #: grader processes alive under a Ray worker or a driver when that one was killed: the
    #: process that reads their answer is gone, so no answer of theirs can be acknowledged
    orphaned: set = field(default_factory=set)
    #: batches answered twice whose first answer came from a grader process killed after
    #: it printed (its exit status is that of the kill, so the answer is refused), or from
    #: one orphaned by the kill of its worker or driver (nobody read the answer)
    answered_then_killed: int = 0
    log: list = field(default_factory=list)


def grader_command(root: Path) -> list[str]:
    """The grader's argv: the script, the counter file and the pace file under ``root``."""
    script = root / "grader.py"
    script.write_text(GRADER)
    return [sys.executable, "-S", str(script), str(root / "calls"), str(root / "pace")]


def build(root: Path, *, queries: int, chunks: int = 10, workers: int = 2) -> dict:
    """An experiment under ``root`` whose grader-a runs :data:`GRADER` on Ray."""
    root.mkdir(parents=True, exist_ok=True)
    return ex.build(root, queries=queries, chunks=chunks,
                    paths={"call_cache": "data/private/call-cache.jsonl"},
                    graders={"grader-a": {"role": "grader", "kind": "model", "family": "test",
                                          "command": grader_command(root), "timeout": 60,
                                          "retries": 2, "executor": "ray",
                                          "workers": workers}})


def grades_file(root: Path) -> Path:
    return root / "data/grades/grader-a/round-1.jsonl"


def driver_command(root: Path, address: str) -> list[str]:
    return [sys.executable, "-c", DRIVER, "grade", "run", "--grader", "grader-a", "--params",
            str(root / "params.yaml"), "--no-progress", "--executor", "ray",
            "--address", address]


def grader_processes(marker: str) -> list[tuple[int, int]]:
    """(pid, parent pid) of live grader processes carrying ``RUN_MARKER=marker``."""
    needle = f"{RUN_MARKER}={marker}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if needle in env and fields[0] != "Z":
            out.append((int(name), int(fields[1])))
    return out


def is_ray_worker(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"ray::" in cmd or b"default_worker.py" in cmd


def open_store(path: Path, wait: float = 20.0) -> GradeStore:
    """Open the store as the next run would (its lock may linger a moment after a kill:
    a child caught mid-fork holds it until its exec)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return GradeStore(path).open()
        except ProtocolError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def raw_torn(path: Path) -> bool:
    """Whether the grade file shows an interrupted append (a torn tail or an in-flight
    marker beyond the file's end) before the next open recovers it."""
    from relgrade.graders.store import marker_path

    if not path.exists():
        return False
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        return True
    try:
        mark = marker_path(path).read_bytes().split()
        return mark[0] == b"relgrade-inflight" and int(mark[2]) > len(data)
    except (OSError, IndexError, ValueError):
        return False


def check_store(root: Path, out: Outcome, previous: set, acked: int) -> set:
    """Open the store as the next run would; count what is wrong; return its pairs."""
    path = grades_file(root)
    if raw_torn(path):
        out.torn_seen += 1
    if not path.exists():
        pairs: list = []
        rows: list = []
    else:
        with open_store(path) as store:
            rows = [r for _, r in store.rows]
        pairs = [(r["query_id"], r["chunk_id"]) for r in rows]
        for line in path.read_bytes().split(b"\n")[:-1]:
            try:
                json.loads(line)
            except ValueError:
                out.torn_left += 1
        bank = [b for _, b in read_bank(path) or []]
        out.bank_mismatches += sum(
            1 for r, b in zip(rows, bank)
            if b.get("row_sha256") != row_sha256(r)
            or (b["query_id"], b["chunk_id"]) != (r["query_id"], r["chunk_id"]))
        out.bank_mismatches += max(0, len(rows) - len(bank))  # a row without its record
    have = set(pairs)
    out.duplicates += len(pairs) - len(have)
    out.lost += len(previous - have)
    # every batch the driver reported saved is among the rows it added
    out.lost += max(0, acked - (len(have) - len(previous & have)))
    return have


def calls(root: Path, killed=frozenset()) -> tuple[Counter, Counter, Counter, dict]:
    """Grader processes that read each request (by sha256), that answered each request, and
    that answered each batch (``QUERY:BATCH``, whatever the attempt); and per batch the
    process ids that answered it.

    The first counter's entry ``"after an answer"`` counts processes that read a request
    some process had already answered. An answer printed by a grader process in ``killed``
    (pids the loop killed) does not count in either: its exit status is the kill's, so
    relgrade refused it, and asking that request again is right (a driver killed after
    the retry starts the batch again at its first attempt, the very request refused)."""
    starts, dones, batches = Counter(), Counter(), Counter()
    answerers: dict = {}
    path = root / "calls"
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = line.split()
        if len(parts) != 4 or len(parts[1]) != 64:
            continue
        if parts[0] == "start":
            if dones[parts[1]]:
                starts["after an answer"] += 1
            starts[parts[1]] += 1
        else:
            if int(parts[2]) not in killed:
                dones[parts[1]] += 1
            batches[parts[3].rsplit(":", 1)[0]] += 1
            answerers.setdefault(parts[3].rsplit(":", 1)[0], []).append(int(parts[2]))
    return starts, dones, batches, answerers


def cpu_seconds() -> float:
    """CPU seconds of this process's reaped children and itself."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def kill_loop(root: Path, *, address: str, packets: dict, kills: int, seed: int,
              pace: float = 0.4, budget: float = 600.0, ray_pids=None) -> Outcome:
    """Kill the driver, a Ray worker or a grader process ``kills`` times, then finish.

    Parameters
    ----------
    root : Path
        The experiment (:func:`build`).
    address : str
        The Ray cluster's GCS address (``127.0.0.1:PORT``).
    packets : dict
        The grader's packets (to count the pool's pairs).
    kills : int
        Kills in all; the kinds (driver, worker, grader) in a seeded balanced order.
    seed : int
        Seeds the kinds' order and the delays.
    pace : float, default 0.4
        Seconds each grader process sleeps while the loop kills; 0 for the last run.
    budget : float, default 600
        Seconds for the whole loop; past it the loop stops with an error.
    ray_pids : callable, optional
        Returns the pids of the cluster's processes, to add their CPU time (with that of
        the workers they reaped) to that of the drivers.

    Returns
    -------
    Outcome
    """
    rng = np.random.default_rng(seed)
    out = Outcome(pairs=sum(len(b) for p in packets.values() for b in p["batches"]))
    order = [str(k) for k in rng.permutation(np.resize(np.array(KINDS), kills))]
    marker = str(grades_file(root).resolve())
    (root / "pace").write_text(str(pace))
    env = dict(os.environ)
    t0 = time.monotonic()
    cpu0 = cpu_seconds() + (0.0 if ray_pids is None else ray_cpu(ray_pids()))
    deadline = t0 + budget
    have: set = set()
    driver = None
    runs_log = []

    def start():
        n = out.runs
        out.runs += 1
        f = open(root / f"driver-{n}.out", "w")
        p = subprocess.Popen(driver_command(root, address), env=env, stdout=f,
                             stderr=subprocess.STDOUT)
        f.close()
        return p, root / f"driver-{n}.out"

    def ended(run):
        nonlocal have
        proc, log = run
        proc.wait()
        text = log.read_text()
        acked = sum(int(x.split()[1]) for x in text.splitlines() if x.startswith("saved "))
        out.acked += acked
        have = check_store(root, out, have, acked)
        runs_log.append((proc.returncode, acked, len(have)))
        return text

    i = 0
    while i < len(order):
        kind = order[i]
        if driver is not None and driver[0].poll() is not None:
            ended(driver)
            driver = None
        if driver is None:
            driver = start()
        # wait until this driver grades: a grader process whose Ray worker is alive
        target = None
        while time.monotonic() < deadline and driver[0].poll() is None:
            live = [(g, w) for g, w in grader_processes(marker) if is_ray_worker(w)]
            if live:
                time.sleep(float(rng.uniform(0.05, 1.2)))
                live = [(g, w) for g, w in grader_processes(marker) if is_ray_worker(w)]
                if kind == "driver":
                    target = driver[0].pid
                elif live:
                    g, w = live[int(rng.integers(len(live)))]
                    target = g if kind == "grader" else w
                if target is not None:
                    break
            time.sleep(0.02)
        if target is None:
            if driver[0].poll() is not None:
                text = ended(driver)
                raise RuntimeError(f"the run ended before kill {sum(out.kills.values()) + 1} "
                                   f"(give it more work): {text[-2000:]}")
            raise RuntimeError("the kill loop ran out of time")
        # the graders whose answers this kill leaves unread: every grader of the driver's
        # job, or those under the killed worker (taken before the kill, while they are alive)
        under = {g for g, w in grader_processes(marker)
                 if kind == "driver" or (kind == "worker" and w == target)}
        try:
            os.kill(target, signal.SIGKILL)
            out.kills[kind] += 1
            out.killed.append((kind, target))
        except ProcessLookupError:  # it finished just now: kill another one of its kind
            continue
        out.orphaned |= under
        i += 1
        if kind == "driver":
            ended(driver)
            driver = None
    # the last runs: fast graders, until one completes
    (root / "pace").write_text("0")
    final = None
    for _ in range(4):
        if driver is None:
            driver = start()
        text = ended(driver)
        driver = None
        if runs_log[-1][0] == 0 and f"0 of {out.pairs} pairs still lack a grade" in text:
            final = text
            break
    if final is None:
        raise RuntimeError(f"no run completed: {runs_log}")
    out.recorded = len(have)
    killed_graders = {pid for kind, pid in out.killed if kind == "grader"}
    starts, dones, batches, answerers = calls(root, killed_graders)
    out.resent_after_answer = starts.pop("after an answer", 0)
    out.starts, out.answers = sum(starts.values()), sum(dones.values())
    out.sent_twice = sum(1 for n in starts.values() if n > 1)
    out.answered_twice = sum(1 for n in dones.values() if n > 1)
    out.batches_answered_twice = sum(1 for n in batches.values() if n > 1)
    out.answered_then_killed = sum(1 for pids in answerers.values()
                                   if len(pids) > 1
                                   and pids[0] in killed_graders | out.orphaned)
    spool = root / "data/private/call-cache.jsonl.spool"
    left = sorted(spool.glob("*.out")) if spool.is_dir() else []
    out.spool_files = [(p.name, p.stat().st_size) for p in left]
    out.spool_left = len(left)
    out.seconds = time.monotonic() - t0
    out.cpu_seconds = cpu_seconds() - cpu0
    if ray_pids is not None:
        out.cpu_seconds += ray_cpu(ray_pids())
    out.log = runs_log
    return out


def ray_cpu(pids) -> float:
    """CPU seconds (with reaped children) of the given processes, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])
    return total / tick
