"""``kill -9`` of the Ray executor's driver, its workers and their grader processes, in a loop.

    python benchmarks/killnine_ray.py [--kills 24] [--queries 100] [--seed 20261202]

Starts a local Ray instance on loopback (``ray.init`` with 2 CPUs, no dashboard; stopped at
the end), builds an experiment of ``--queries`` queries of 10 chunks (two batches each) whose
grader is a fresh Python process per batch that logs every request it reads and answers (by
the sha256 of the request's bytes) and sleeps 0.4 s, then kills, at seeded random moments
while grading, ``--kills`` times in a balanced seeded order: the driver (a
``relgrade grade run --executor ray --address ...`` process, started again after each kill),
a Ray worker running a batch, or a grader process under one. Then the grader is made fast
and runs are started until one completes. The loop is ``tests/graders/raykill.py``; it
prints one table row per measure.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.graders import raykill  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=24)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--budget", type=float, default=900.0, help="seconds for the loop")
    args = ap.parse_args(argv)

    import psutil
    import ray

    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory(prefix="rk") as tmp:
        tmp = Path(tmp)
        t0 = time.monotonic()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 _node_ip_address="127.0.0.1", _temp_dir=str(tmp / "ray"))
        started = time.monotonic() - t0
        try:
            address = ray.get_runtime_context().gcs_address

            def cluster():
                return [p.pid for p in psutil.Process().children(recursive=True)]

            packets = raykill.build(tmp / "exp", queries=args.queries)
            out = raykill.kill_loop(tmp / "exp", address=address, packets=packets,
                                    kills=args.kills, seed=args.seed, budget=args.budget,
                                    ray_pids=cluster)
        finally:
            ray.shutdown()
    load = os.getloadavg()
    rows = [
        ("kills: driver / Ray worker / grader process",
         " / ".join(str(out.kills[k]) for k in raykill.KINDS)),
        ("driver runs (the last completes)", out.runs),
        ("pool pairs / recorded", f"{out.pairs} / {out.recorded}"),
        ("pairs the drivers reported saved", out.acked),
        ("duplicates / lost / torn lines left / bank mismatches",
         f"{out.duplicates} / {out.lost} / {out.torn_left} / {out.bank_mismatches}"),
        ("interrupted appends recovered on open", out.torn_seen),
        ("grader processes started / answered", f"{out.starts} / {out.answers}"),
        ("requests read twice (first reader killed before answering)", out.sent_twice),
        ("requests answered twice / read again after an answer",
         f"{out.answered_twice} / {out.resent_after_answer}"),
        ("batches answered again under a retry's request (of them: first grader killed "
         "after printing)", f"{out.batches_answered_twice} ({out.answered_then_killed})"),
        ("spool files left (bytes)", f"{out.spool_left} "
         f"({', '.join(str(b) for _, b in out.spool_files) or '-'})"),
        ("seconds (loop) / Ray start", f"{out.seconds:.1f} / {started:.1f}"),
        ("CPU seconds (drivers, graders, Ray)", f"{out.cpu_seconds:.1f}"),
        ("load average 1 / 5 / 15 min after", " / ".join(f"{x:.2f}" for x in load)),
    ]
    print("| measure | value |\n|---|---:|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    print("driver runs (exit status, pairs reported saved, pairs on disk after):", out.log)
    bad = out.duplicates or out.lost or out.torn_left or out.bank_mismatches \
        or out.answered_twice or out.resent_after_answer or out.recorded != out.pairs \
        or out.batches_answered_twice != out.answered_then_killed
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
