"""``kill -9`` of the Ray raylet, or of its runtime-env agent, under a running
``relgrade grade run --executor ray``.

Ray's driver waits for ever on a task whose raylet is gone (no error reaches it; a raylet
ends itself when its runtime-env agent dies). The run must instead end within the grader's
timeout with one ``Error:`` line naming what died and the command to rerun, every batch it
reported saved on disk, and the rerun must finish the pool.

Real Ray: the driver is a separate ``relgrade grade run`` process (tests/graders/raykill.py's
driver, printing ``saved N`` per batch the single writer acknowledged) that starts its own
local Ray instance (the executor's own start, no ``--address``), in a temporary folder of
its own so that every Ray process of the test is found, and ended, by that folder.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.graders import raykill

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.slow]  # two local Ray starts (~10-25 s each) and a graded pool

#: The grader's timeout in raykill.build (params graders.grader-a.timeout).
TIMEOUT = 60.0

#: Seconds allowed past the kill beyond nothing: the run must end within the grader timeout;
#: in practice it ends within the check interval plus Ray's shutdown (a few seconds).
SLACK = 0.0


def ray_processes(folder: str) -> list[int]:
    """Pids of live processes whose command line names ``folder`` (the Ray session's), and
    of their children (workers and agents rename themselves ``ray::...``)."""
    named, parents = set(), {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z":
            continue
        parents[int(name)] = int(fields[1])
        if folder.encode() in cmd:
            named.add(int(name))
    return sorted(named | {pid for pid, parent in parents.items() if parent in named})


def raylet_of(folder: str) -> int | None:
    """The pid of the raylet of the session under ``folder``."""
    for pid in ray_processes(folder):
        try:
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if argv0.endswith(b"/raylet/raylet"):
            return pid
    return None


def agent_of(folder: str) -> int | None:
    """The pid of the runtime-env agent the raylet of ``folder`` started (it names itself
    ``ray::RuntimeEnvAgent``)."""
    raylet = raylet_of(folder)
    for name in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            parent = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if parent == raylet and cmd.startswith(b"ray::RuntimeEnvAgent"):
            return int(name)
    return None


#: The process killed, and how it is found.
VICTIMS = {"raylet": raylet_of, "runtime-env agent": agent_of}


@pytest.fixture
def ray_folder():
    # short: Ray's unix socket paths under it must stay below 108 bytes
    folder = tempfile.mkdtemp(prefix="rgray")
    yield folder
    for pid in ray_processes(folder):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(folder, ignore_errors=True)


def driver(root: Path, env: dict, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-c", raykill.DRIVER, "grade", "run", "--grader", "grader-a",
            "--params", str(root / "params.yaml"), "--no-progress"]
    with open(log, "w") as f:
        return subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT)


@pytest.mark.parametrize("what", list(VICTIMS))
def test_a_killed_raylet_or_agent_ends_the_run_within_the_timeout_keeping_every_saved_grade(
        tmp_path, ray_folder, what):
    raykill.build(tmp_path, queries=8, chunks=10, workers=2)
    (tmp_path / "pace").write_text("0.5")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_TMPDIR=ray_folder, RAY_AUTH_MODE="disabled")

    run = driver(tmp_path, env, tmp_path / "run-1.out")
    try:
        deadline = time.monotonic() + 120
        while "saved " not in (tmp_path / "run-1.out").read_text():
            assert run.poll() is None, (tmp_path / "run-1.out").read_text()
            assert time.monotonic() < deadline, "no batch saved within 120 s"
            time.sleep(0.2)
        victim = VICTIMS[what](ray_folder)
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        try:
            code = run.wait(timeout=TIMEOUT + SLACK)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the run did not end within {TIMEOUT + SLACK:g} s of the {what}'s kill")
        took = time.monotonic() - killed
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    text = (tmp_path / "run-1.out").read_text()
    print(f"ended {took:.1f} s after the {what}'s kill")
    assert code == 1, text
    assert "Traceback" not in text
    errors = [line for line in text.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, text
    # a raylet ends itself when its runtime-env agent dies: either may be found dead first
    assert re.match(r"Error: the Ray (raylet|runtime-env agent) at [0-9.]+:[0-9]+ ", errors[0])
    assert " refuses connections: it died, and this machine's Ray node can run no more tasks." \
        in errors[0]
    assert errors[0].endswith("rerun: relgrade grade run --grader grader-a")
    acked = sum(int(x.split()[1]) for x in text.splitlines() if x.startswith("saved "))
    assert acked >= 5  # a batch of 5 saved before the kill

    out = raykill.Outcome(pairs=80)
    have = raykill.check_store(tmp_path, out, set(), acked)
    assert (out.lost, out.duplicates, out.torn_left, out.bank_mismatches) == (0, 0, 0, 0)
    assert len(have) >= acked

    # the rerun starts a fresh local instance and grades the rest
    (tmp_path / "pace").write_text("0")
    rerun = driver(tmp_path, env, tmp_path / "run-2.out")
    try:
        assert rerun.wait(timeout=240) == 0, (tmp_path / "run-2.out").read_text()
    finally:
        if rerun.poll() is None:
            rerun.kill()
            rerun.wait()
    have = raykill.check_store(tmp_path, out, have, 0)
    assert len(have) == 80
    assert (out.lost, out.duplicates, out.torn_left, out.bank_mismatches) == (0, 0, 0, 0)
