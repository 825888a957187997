"""Check that the pool stage's code writes the committed pool outputs of experiments, byte
for byte.

    python benchmarks/check_pool_outputs.py [--repo PATH] [--engine spark] [FOLDER ...]

For each experiment folder (default: the top-level experiment and every
``experiments/*/`` whose params have a ``pool`` section), relative to ``--repo`` (default:
this checkout, whose DVC-tracked inputs must be checked out), the pool stage
(:func:`relgrade.pipeline.stages.pool.run`) runs on the experiment's own params and inputs
(runs, query table, corpus) with its four outputs (pool, provenance, manifest, statistics)
sent to a temporary folder, on the local engine or, with ``--engine spark``, on Spark in
local mode (``pool.engine: spark``); each is then compared with the experiment's file.
Exits 1 and
names the files that differ or are missing. Nothing in the experiment is written.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml

from relgrade.experiment.files import Experiment
from relgrade.pipeline.stages import pool as pool_stage

OUTPUTS = ("pool", "provenance", "pool_manifest", "pool_stats")
INPUTS = ("runs", "queries", "chunks")


def check(folder: Path, scratch: Path, engine: str = "local") -> list[str]:
    """The outputs of ``folder``'s pool stage that differ from its files (names)."""
    raw = yaml.safe_load((folder / "params.yaml").read_text())
    raw["pool"]["engine"] = engine
    paths = raw["paths"]
    committed = {name: folder / paths[name] for name in OUTPUTS}
    for name in INPUTS:
        paths[name] = str((folder / paths[name]).resolve())
    for name in OUTPUTS:
        paths[name] = str(scratch / name / Path(committed[name]).name)
    ex = Experiment.from_mapping(raw, root=folder)
    pool_stage.run(ex)
    if engine == "spark":  # say whether Spark did the work or left it to the local engine
        from relgrade.tables import spark

        done = spark.arm_candidates(
            spark.session(), {str(a): ex.path("runs") / f"{a}.trec" for a in raw["arms"]},
            depth=ex.params.pool.depth, ties=ex.params.runs.ties,
            queries=ex.path("queries"), chunks=ex.path("chunks")) is not None
        print(f"{folder}: Spark " + ("read, checked and cut the runs" if done
                                     else "left the runs to the local engine"))
    return [f"{folder / raw_name}" for name, raw_name in
            ((n, committed[n].relative_to(folder)) for n in OUTPUTS)
            if not committed[name].exists()
            or committed[name].read_bytes() != Path(paths[name]).read_bytes()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--engine", choices=["local", "spark"], default="local")
    ap.add_argument("folders", nargs="*", type=Path)
    args = ap.parse_args()
    folders = args.folders or [Path("."), *sorted(
        p.parent.relative_to(args.repo) for p in args.repo.glob("experiments/*/params.yaml")
        if "pool" in (yaml.safe_load(p.read_text()) or {}))]
    bad = 0
    for rel in folders:
        folder = args.repo / rel
        with tempfile.TemporaryDirectory() as scratch:
            differ = check(folder, Path(scratch), args.engine)
        print(f"{rel} ({args.engine}): {len(OUTPUTS) - len(differ)} of {len(OUTPUTS)} pool "
              "outputs "
              "byte-identical" + "".join(f"\n  differs: {d}" for d in differ))
        bad += len(differ)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
