"""``relgrade drift --log LOG``: how far a current query log has moved from the query set."""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


@click.command("drift")
@params_option
@click.option("--log", "log_path", required=True,
              type=click.Path(path_type=Path),
              help="The current query log (as for `relgrade queries sample`: one query per "
                   "line, or a .tsv, .parquet or .jsonl with query and count).")
@click.option("--out", "out_path", default=None, type=click.Path(path_type=Path),
              help="The JSON to write (default: drift.json beside the sample manifest, "
                   "data/queries/drift.json).")
@handle_errors
def drift_cmd(params_path, log_path, out_path):
    """Compare the experiment's sampled query set with a current query log.

    The log's traffic is laid over the strata of the log the set was drawn from (params
    queries.log): head, torso, tail, and new (queries that log lacks). Prints each side's
    shares, the total variation distance between them with a seeded bootstrap interval, the
    log's frequent queries the set lacks, and a recommended refresh slice; flags the set when
    the distance exceeds params drift.max_shift (default 0.1). Writes the same as JSON.
    """
    from relgrade.cli import render
    from relgrade.experiment import query_drift
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.params import Drift
    from relgrade.io.files import (require_input_file, require_output_file, sha256_file,
                                   write_json)

    require_input_file(log_path, option="--log")
    if out_path is not None:
        require_output_file(out_path, option="--out")
    ex = Experiment.load(params_path)
    settings = ex.params.drift or Drift()
    result = query_drift.measure(ex, log_path)
    child = result.child_seed
    out_path = out_path or (ex.path("sample_manifest").parent / "drift.json"
                            if ex.params.paths.sample_manifest
                            else ex.root / "data/queries/drift.json")
    record = {"log": log_path.as_posix(), "log_sha256": sha256_file(log_path),
              "reference": ex.params.queries.log, "query_set": ex.params.queries.input,
              **result.to_dict()}
    write_json(out_path, record)

    click.echo(f"{log_path.as_posix()}: {result.issued} issued queries, {result.distinct} "
               f"distinct; the query set: {result.set_size} queries "
               f"({ex.file(ex.params.queries.input).as_posix()}, drawn from "
               f"{ex.file(ex.params.queries.log).as_posix()})")
    rows = [[r["bucket"], _pct(r["set"]), _pct(r["log"]), _points(r["shift"]),
             str(r["log_queries"])] for r in result.shares]
    click.echo("\n".join(render.table(["stratum", "set", "log", "shift (points)",
                                         "log queries"], rows, right={1, 2, 3, 4})))
    low, high = result.interval
    click.echo(f"total variation {result.total_variation:.3f} [{low:.3f}, {high:.3f}] "
               f"({100 * result.level:g}% bootstrap, {result.bootstrap} resamples, seed "
               f"{child}); Jensen-Shannon {result.jensen_shannon:.3f}")
    if result.new_frequent:
        click.echo("New frequent queries (the log's head, not in the set):")
        rows = [[r["query_id"], r["query"], str(r["count"]), _pct(r["share"]), r["reference"]]
                for r in result.new_frequent]
        click.echo("\n".join("  " + line for line in render.table(
            ["query_id", "query", "count", "share", "was"], rows, right={2, 3})))
    if result.flagged:
        share = round(result.slice_share, 4)
        click.echo(f"DRIFT: {_pct(result.total_variation)} of the traffic changed stratum, "
                   f"above drift.max_shift {settings.max_shift:g}: refresh "
                   f"{result.slice_queries} of {result.set_size} queries: relgrade queries "
                   f"refresh --experiment {ex.root.as_posix()} --log {log_path.as_posix()} "
                   f"--share {share:g}")
    else:
        click.echo(f"No drift beyond drift.max_shift {settings.max_shift:g}: no refresh "
                   "needed beyond the scheduled one")
    click.echo(f"Wrote {out_path.as_posix()}")
