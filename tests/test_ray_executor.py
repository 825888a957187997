"""`relgrade grade run --executor ray`: each batch a Ray task running a fresh grader process.

A real local Ray cluster (``ray.init(num_cpus=2)``), real grader processes
(tests/graders/grader.py); the grade store's single writer stays in this process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from relgrade.errors import InputError, RelgradeError
from relgrade.graders import command as graderun
from relgrade.graders.command import RUN_MARKER
from relgrade.graders.store import read_bank
from tests.graders import experiment as ex

ray = pytest.importorskip("ray")

CACHE = {"call_cache": "data/private/call-cache.jsonl"}


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def graders(mode="ok", env=None, **kw):
    # A Ray worker has the environment its cluster started with, not this process's: the
    # test's variables travel in the command itself.
    prefix = ["env", *(f"{k}={v}" for k, v in (env or {}).items())] if env else []
    return {"grader-a": {"role": "grader", "kind": "model", "family": "test",
                         "command": prefix + ex.command(mode), "timeout": 60, "retries": 1,
                         "executor": "ray", **kw}}


def run(root, *args):
    return CliRunner().invoke(main, ["grade", "run", "--grader", "grader-a", "--params",
                                     str(root / "params.yaml"), "--no-progress", *args])


def grades_file(root):
    return root / "data/grades/grader-a/round-1.jsonl"


def truth_rows(packets):
    return sorted((q, c["chunk_id"], ex.truth(c["chunk_id"]))
                  for q, p in packets.items() for b in p["batches"] for c in b)


def recorded(root):
    return sorted((r["query_id"], r["chunk_id"], r["grade"])
                  for r in ex.read_rows(grades_file(root)))


def test_the_executor_setting_is_checked_and_the_option_overrides_it():
    with pytest.raises(InputError, match="executor must be one of local, ray"):
        graderun.grader_setup({"role": "grader", "kind": "model", "command": "x",
                               "executor": "spark"}, "g")
    s = graderun.grader_setup({"role": "grader", "kind": "model", "command": "x",
                               "executor": "ray", "address": "ray://head:10001"}, "g",
                              executor="local")
    assert (s.executor, s.address) == ("local", "ray://head:10001")


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch):
    from relgrade.graders.rayexec import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    with pytest.raises(RelgradeError, match=r"pip install 'relgrade\[ray\]'"):
        import_ray()


@pytest.mark.slow  # the module's local Ray cluster (its start about 25 s)
def test_a_ray_run_records_what_a_local_run_records_one_fresh_process_per_batch(
        tmp_path, cluster):
    log = tmp_path / "log"
    log.mkdir()
    packets = ex.build(tmp_path / "ray", queries=3, chunks=7,
                       graders=graders(workers=2, env={"RELGRADE_TEST_LOG": log}), paths=CACHE)
    res = run(tmp_path / "ray")
    assert res.exit_code == 0, res.output
    assert "graded 21 pairs in 6 batches" in res.output and "6 processes" in res.output
    assert recorded(tmp_path / "ray") == truth_rows(packets)
    requests = [json.loads(f.read_text()) for f in log.iterdir()]
    # one process per batch: 3 queries x (5 + 2 chunks), each request seen once
    assert sorted((r["query_id"], r["batch"]) for r in requests) == \
        [(q, b) for q in ("q01", "q02", "q03") for b in (0, 1)]
    # rows of a query in display order, each batch whole, as the local executor writes them
    rows = ex.read_rows(grades_file(tmp_path / "ray"))
    for q, p in packets.items():
        assert [r["chunk_id"] for r in rows if r["query_id"] == q] == \
            [c["chunk_id"] for b in p["batches"] for c in b]
    ex.build(tmp_path / "local", queries=3, chunks=7, graders=graders(executor="local"))
    assert run(tmp_path / "local").exit_code == 0
    assert recorded(tmp_path / "local") == recorded(tmp_path / "ray")


@pytest.mark.slow  # the module's local Ray cluster (its start about 25 s)
def test_the_executor_option_runs_a_local_grader_on_ray_and_the_cache_still_answers(
        tmp_path, cluster):
    counter = tmp_path / "calls"
    root = tmp_path / "one"
    ex.build(root, queries=2, chunks=5, paths=CACHE,
             graders=graders(executor="local", env={"RELGRADE_TEST_COUNTER": counter}))
    first = run(root, "--executor", "ray")
    assert first.exit_code == 0, first.output
    assert len(counter.read_text().split()) == 2
    grades_file(root).unlink()
    grades_file(root).with_name("round-1.bank.jsonl").unlink()
    second = run(root, "--executor", "ray")
    assert second.exit_code == 0, second.output
    assert len(counter.read_text().split()) == 2 and "0 processes" in second.output
    assert {r["cache"] for _, r in read_bank(grades_file(root))} == {"hit"}


def _grader_processes(marker: str) -> list[tuple[int, int]]:
    """(pid, parent pid) of the grader processes of the run for ``marker``."""
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
        if needle in env:
            out.append((int(name), int(stat.rsplit(")", 1)[1].split()[1])))
    return out


@pytest.mark.slow
def test_a_killed_ray_worker_loses_nothing_and_its_batch_is_sent_again_once(
        tmp_path, cluster):
    counter = tmp_path / "calls"
    root = tmp_path / "one"
    packets = ex.build(root, queries=4, chunks=5, paths=CACHE, graders=graders(
        "sleep:1.5", workers=2, env={"RELGRADE_TEST_COUNTER": counter}))
    marker = str(grades_file(root).resolve())
    killed = []

    def killer():
        # kill the Ray worker of the first two grader processes seen, mid-answer
        deadline = time.monotonic() + 60
        while len(killed) < 2 and time.monotonic() < deadline:
            for pid, parent in _grader_processes(marker):
                if parent not in killed and pid not in killed:
                    time.sleep(0.3)
                    try:
                        os.kill(parent, signal.SIGKILL)
                        killed.append(parent)
                    except ProcessLookupError:
                        pass
                    break
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    res = run(root)
    t.join()
    assert len(killed) == 2
    assert res.exit_code == 0, res.output
    assert "processes lost with their Ray worker were sent again" in res.output
    assert recorded(root) == truth_rows(packets)
    made = counter.read_text().split()
    assert len(made) == len(set(made)) == 4  # every request answered exactly once


@pytest.mark.slow  # the module's local Ray cluster (its start about 25 s)
def test_a_task_whose_driver_died_starts_no_grader_and_leaves_no_spool_file(tmp_path,
                                                                           cluster):
    # Ray ends a killed driver's tasks a moment late; one that begins after the next run
    # asked must not send the same request again.
    from relgrade.graders import raytask

    gone = subprocess.Popen(["sleep", "60"])
    dead = (gone.pid, raytask.process_start(gone.pid))
    gone.kill()
    gone.wait()
    alive = (os.getpid(), raytask.process_start(os.getpid()))
    task = ray.remote(num_cpus=1, max_retries=0)(raytask.run_command)
    node = ray.get_runtime_context().get_node_id()
    argv = [sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'a').write('x')"]

    orphan = ray.get(task.remote(argv, b"", 30.0, {}, str(tmp_path / "a.out"), node, dead))
    assert (orphan["orphaned"], orphan["pid"], orphan["returncode"]) == (True, None, None)
    assert not (tmp_path / "ran").exists() and not (tmp_path / "a.out").exists()

    ran = ray.get(task.remote(argv, b"", 30.0, {}, str(tmp_path / "b.out"), node, alive))
    assert (ran["orphaned"], ran["returncode"]) == (False, 0)
    assert (tmp_path / "ran").read_text() == "x" and (tmp_path / "b.out").exists()
