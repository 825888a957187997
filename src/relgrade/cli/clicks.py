"""``relgrade clicks ...``: position propensities and IPS-weighted pairs from a click log.

``clicks propensity LOG`` prints the propensity curve with bootstrap intervals (and writes
it as JSON); ``clicks pairs LOG --propensity FILE`` writes the skip-above training pairs.
The log is read where it lies by DuckDB (default) or Spark (``--engine spark``), so it need not
fit in memory.
"""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.options import seed_option
from relgrade.cli.render import handle_errors, number, table
from relgrade.errors import InputError

#: Propensity estimators, engines and the default IPS clip, as relgrade.clicks.propensity.
#: METHODS, relgrade.clicks.engine.ENGINES and relgrade.clicks.pairs.DEFAULT_CLIP give them
#: (a test checks all three); spelled here so that loading the command imports neither
#: duckdb nor numpy.
PROPENSITY_METHODS = ("randomization", "harvesting")
ENGINES = ("duckdb", "spark")
DEFAULT_CLIP = 10.0
#: DuckDB's worker threads unless --threads says otherwise (relgrade.clicks.log.
#: DEFAULT_THREADS; the same test checks it).
DEFAULT_THREADS = 1


def _engine_options(fn):
    fn = click.option("--threads", type=click.IntRange(min=1), default=DEFAULT_THREADS,
                      show_default=True,
                      help="DuckDB's worker threads. One costs the fewest CPU-seconds and "
                           "the least memory; more shorten the wall time on idle cores.")(fn)
    fn = click.option("--spark-master", default=None,
                      help="Spark's master URL with --engine spark (default: local[2]); the "
                           "log must be where every executor can read it.")(fn)
    return click.option("--engine", "engine_name", type=click.Choice(list(ENGINES)),
                        default="duckdb", show_default=True,
                        help="Where the click SQL runs: embedded DuckDB, or Apache Spark "
                             "(needs the spark extra and Java 17+).")(fn)


@click.group("clicks")
def clicks_cmd():
    """Click logs: position propensities and IPS-weighted skip-above training pairs."""


@clicks_cmd.command("propensity")
@click.argument("log_path", metavar="LOG", type=click.Path(path_type=Path))
@click.option("--method", type=click.Choice(list(PROPENSITY_METHODS)), default="randomization",
              show_default=True,
              help="randomization: the randomized slice's adjacent swaps; harvesting: the "
                   "same chunk at neighbouring positions under different rankers.")
@click.option("--max-position", type=int, default=10, show_default=True,
              help="Last position to estimate (at least 2).")
@seed_option(default=0, help="Seed of the bootstrap resampling.")
@click.option("--bootstrap", "n_boot", type=int, default=1000, show_default=True,
              help="Bootstrap resamples (of sessions for randomization, of queries for "
                   "harvesting).")
@click.option("--level", type=float, default=0.95, show_default=True,
              help="Confidence level of the intervals.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also write the curve as JSON (the input of `clicks pairs`).")
@click.option("--memory-limit", default=None,
              help="DuckDB's memory limit, e.g. 4GB (default: DuckDB's, 80% of RAM); beyond "
                   "it DuckDB spills to its temporary folder.")
@_engine_options
@handle_errors
def propensity_cmd(log_path, method, max_position, seed, n_boot, level, out_path,
                   memory_limit, engine_name, spark_master, threads):
    """Estimate the position propensity curve p(k)/p(1) of LOG, with bootstrap intervals.

    LOG is an impression log: a Parquet file, a folder of Parquet files, or a CSV file with
    a header row (columns session_id, query_id, chunk_id, position, clicked, ranker,
    randomized; see docs/clicks.md). The curve is printed; --out writes it as JSON.
    """
    import numpy as np

    from relgrade.clicks import engine
    from relgrade.io import files as io
    from relgrade.rng import derive_seed

    if seed < 0:
        raise InputError("--seed must be a non-negative integer", found=str(seed))
    rng = np.random.default_rng(derive_seed(seed, "clicks", "propensity", method))
    runner = engine.get(engine_name, memory_limit=memory_limit, spark_master=spark_master,
                        threads=threads)
    with runner.errors(log_path):
        log = runner.open_log(log_path)
        curve = runner.propensity(log, method=method, rng=rng, max_position=max_position,
                                  n_boot=n_boot, level=level)
    units = "sessions in the randomized slice" if method == "randomization" else \
        "queries with an interventional pair"
    click.echo(f"propensity by {method}: {log.rows:,} impressions, {curve.n_units:,} {units}; "
               f"{int(round(level * 100))}% percentile intervals from {n_boot:,} resamples "
               f"of {'queries' if curve.unit == 'query' else curve.unit + 's'} (seed {seed})")
    rows = [[str(int(r["position"])), number(r["propensity"]), number(r["ci_low"]),
             number(r["ci_high"]), "-" if r["position"] == 1 else f"{int(r['support']):,}"]
            for r in curve.records()]
    click.echo("\n".join(table(["position", "propensity", "ci_low", "ci_high", "support"],
                                 rows)))
    for note in curve.notes:
        click.echo(f"Note: {note}")
    if out_path is not None:
        doc = {"log": log_path.as_posix(), "log_rows": log.rows, "log_sessions": log.sessions,
               "seed": seed, **curve.to_dict()}
        io.write_json(out_path, doc)
        click.echo(f"wrote {out_path.as_posix()}")


@clicks_cmd.command("pairs")
@click.argument("log_path", metavar="LOG", type=click.Path(path_type=Path))
@click.option("--propensity", "propensity_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The curve from `relgrade clicks propensity --out FILE.json`.")
@click.option("--clip", type=float, default=DEFAULT_CLIP, show_default=True,
              help="Largest IPS weight: 1/p(k) above it becomes the clip.")
@click.option("--out", "out_path", required=True, type=click.Path(path_type=Path),
              help="Parquet file for the pairs (query_id, preferred_chunk_id, "
                   "other_chunk_id, weight, session_id); with --engine spark, a folder of "
                   "Parquet part files.")
@click.option("--memory-limit", default=None,
              help="DuckDB's memory limit, e.g. 4GB (default: DuckDB's, 80% of RAM); beyond "
                   "it DuckDB spills to its temporary folder.")
@_engine_options
@handle_errors
def pairs_cmd(log_path, propensity_path, clip, out_path, memory_limit, engine_name,
              spark_master, threads):
    """Write LOG's skip-above preference pairs, weighted by inverse propensity, to --out.

    In each session the chunk clicked at position k is preferred to every unclicked chunk
    above it, with weight min(1/p(k), clip). LOG is read as by `clicks propensity`; a click
    at a position the curve does not cover gives no pair and is counted in the summary.
    """
    from relgrade.clicks import engine
    from relgrade.clicks import pairs as P
    from relgrade.clicks import propensity as PR
    from relgrade.io import files as io

    curve = PR.PropensityCurve.from_dict(io.read_json(propensity_path),
                                         source=propensity_path.as_posix())
    weights = P.weights_from_curve(curve, clip=clip, frame=False)
    runner = engine.get(engine_name, memory_limit=memory_limit, spark_master=spark_master,
                        threads=threads)
    with runner.errors(log_path):
        log = runner.open_log(log_path, weights=weights)
        atomic = io.atomic_path if runner.pairs_layout == "file" else io.atomic_dir
        with atomic(out_path) as tmp:
            n_pairs = runner.write_pairs(log, weights, tmp)
        summary = P.summary_from_positions(runner.clicks_by_position(log), weights,
                                           sessions=log.sessions)
    click.echo(f"wrote {n_pairs:,} pairs to {out_path.as_posix()} from "
               f"{summary['clicks_weighted']:,} clicks in {log.sessions:,} sessions "
               f"({log.rows:,} impressions)")
    if summary["clicks_without_propensity"]:
        click.echo(f"Note: {summary['clicks_without_propensity']:,} click(s) at position(s) "
                   f"{_positions(summary['positions_without_propensity'])} have no propensity "
                   f"in {propensity_path.as_posix()} and give no pair")
    if summary["clicks_clipped"]:
        click.echo(f"Note: {summary['clicks_clipped']:,} click(s) at position(s) "
                   f"{_positions(summary['positions_clipped'])} have weight 1/p(k) > "
                   f"{clip:g}, clipped to {clip:g}")


def _positions(ks: list[int]) -> str:
    shown = ", ".join(map(str, ks[:10]))
    return shown + (", ..." if len(ks) > 10 else "")
