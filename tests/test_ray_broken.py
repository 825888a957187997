"""A Ray cluster that stops running the grader's tasks ends the run well within the grader's
timeout, keeps what was recorded and prints the command to resume, instead of sending every
batch again and again (a dead raylet or runtime-environment agent loses every process).

A real local Ray cluster; the grader kills the Ray worker that started it on every batch
after the first query's, so every later send is lost as with a dead agent.
"""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from relgrade.cli import main
from tests.graders import experiment as ex

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.slow]  # a local Ray cluster started and its workers killed (~25 s)


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_a_cluster_that_loses_every_process_ends_the_run_and_keeps_what_was_recorded(
        cluster, tmp_path):
    ex.build(tmp_path, queries=3, chunks=7,
             graders={"grader-a": {"role": "grader", "kind": "model", "family": "test",
                                   "command": ex.command("orphan"), "timeout": 60,
                                   "retries": 1, "workers": 1, "executor": "ray"}})
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["grade", "run", "--grader", "grader-a", "--params",
                                    str(tmp_path / "params.yaml"), "--no-progress"])
    took = time.monotonic() - t0
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    assert took < 60, f"took {took:.0f} s, the grader timeout is 60 s"
    # q01's two batches (5 + 2 chunks) were answered before the cluster broke
    recorded = ex.read_rows(tmp_path / "data/grades/grader-a/round-1.jsonl")
    assert sorted(r["chunk_id"] for r in recorded) == sorted(f"q01-c{j}" for j in range(7))
    error = res.output.strip().splitlines()[-1]
    # 1 worker: more than MAX_LOST (3) losses in a row mean the cluster, not a worker
    assert error.startswith("Error: 4 grader processes in a row were lost with their Ray "
                            "worker over ")
    assert error.endswith("the Ray cluster stopped running tasks (a dead raylet or "
                          "runtime-environment agent). The 7 grades recorded in this run are "
                          "kept; once the cluster runs tasks again (ray status), rerun: "
                          "relgrade grade run --grader grader-a")
