"""CPU cost of the pipeline-shape check every stage DVC runs makes before its work.

For each committed experiment (the repository's top one and ``experiments/*``), the median
CPU-seconds of :func:`relgrade.pipeline.registry.shape` over ``--repeats`` calls (after one
warm-up call, the imports a stage has made anyway), beside the median of a full
:func:`relgrade.pipeline.registry.render` (which builds the import graph). Prints one line per
experiment and the load average at the start and end.

    python benchmarks/bench_shape_check.py --repeats 9
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from relgrade.experiment.files import Experiment
from relgrade.experiment.layout import experiment_folders, find_repository
from relgrade.experiment.params import PARAMS_FILE
from relgrade.pipeline.registry import render, shape


def cpu(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    for folder in experiment_folders(find_repository(Path("."))):
        shape(folder)  # warm-up
        check = cpu(lambda: shape(folder), args.repeats)
        ex = Experiment.load(folder / PARAMS_FILE)
        full = cpu(lambda: render(ex), max(1, args.repeats // 3))
        print(f"{folder.name or '.'}: shape check {check * 1000:.0f} ms CPU (median of "
              f"{args.repeats}), full render {full * 1000:.0f} ms")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
