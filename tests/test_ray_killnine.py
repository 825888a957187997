"""``kill -9`` of the Ray executor's driver, its Ray workers and their grader processes.

A real local Ray cluster on loopback; each driver a separate ``relgrade grade run
--executor ray --address ...`` process (see tests/graders/raykill.py for the loop and what it
counts; benchmarks/killnine_ray.py runs the same loop with at least 20 kills).
"""

from __future__ import annotations

import pytest

from tests.graders import raykill

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

pytestmark = [pytest.mark.slow]

KILLS = 21


@pytest.fixture(scope="module")
def address(tmp_path_factory):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1",
             _temp_dir=str(tmp_path_factory.mktemp("ray")))
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def test_kill_9_of_driver_workers_and_graders_loses_no_grade_and_answers_no_request_twice(
        tmp_path, address):
    packets = raykill.build(tmp_path, queries=60)
    out = raykill.kill_loop(tmp_path, address=address, packets=packets, kills=KILLS,
                            seed=20261202)
    print(out)
    assert {k: out.kills[k] for k in raykill.KINDS} == {"driver": 7, "worker": 7, "grader": 7}
    assert out.recorded == out.pairs == 600
    assert (out.duplicates, out.lost, out.torn_left, out.bank_mismatches) == (0, 0, 0, 0)
    # no request (by the sha256 of its bytes, one-to-one with its cache key) answered twice,
    # none sent again once answered; a batch answered twice only when its first grader
    # process was killed after printing, or was left without a reader by the kill of its
    # Ray worker or driver (an answer nobody acknowledged is asked for again: the retry's
    # request differs by its attempt number, or, after the driver too is killed, the next
    # run asks the refused request again, which is right and not counted)
    assert (out.answered_twice, out.resent_after_answer) == (0, 0)
    assert out.batches_answered_twice == out.answered_then_killed
