"""``relgrade queries sample LOG``: a stratified, traffic-weighted query set from a query log."""

from __future__ import annotations

import math
from pathlib import Path

import click

from relgrade.cli.options import params_option, seed_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError


def parse_allocation(text: str):
    """``equal``, ``proportional`` or ``head=A,torso=B,tail=C`` (relative shares)."""
    if text in ("equal", "proportional"):
        return text
    shares = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not sep or not math.isfinite(number):
            raise InputError("--allocation must be equal, proportional or "
                             "head=A,torso=B,tail=C with numbers A, B, C", found=repr(text))
        shares[name.strip()] = number
    return shares


def _seed(seed, params_path: Path) -> int:
    from relgrade.io.files import read_yaml

    if seed is not None:
        return seed
    if params_path.exists():
        value = read_yaml(params_path).get("seed")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    raise InputError("no seed: give --seed, or run where the params file has a `seed`",
                     path=params_path)


@click.group("queries")
def queries_cmd():
    """Query sets: sample one from a query log, or refresh a slice of one."""


@queries_cmd.command("sample")
@click.argument("log_path", metavar="LOG", type=click.Path(path_type=Path))
@click.option("--n", "n", type=int, required=True,
              help="How many distinct queries to sample (at most the distinct queries in LOG).")
@click.option("--allocation", default="equal", show_default=True,
              help="How --n is split over head, torso and tail: equal, proportional (to "
                   "traffic) or head=A,torso=B,tail=C (relative shares).")
@seed_option(default=None, help="Seed of the sample. Default: the `seed` of the params file.")
@params_option
@click.option("--head-share", type=float, default=0.5, show_default=True,
              help="Share of the traffic the head's queries make together.")
@click.option("--torso-share", type=float, default=0.3, show_default=True,
              help="Share of the traffic the torso's queries make together; the tail has "
                   "the rest.")
@click.option("--out", "out_path", required=True,
              type=click.Path(path_type=Path),
              help="The queries TSV to write (query_id, query, group, weight, count).")
@handle_errors
def sample_cmd(log_path, n, allocation, seed, params_path, head_share, torso_share, out_path):
    """Sample a query set from a query log, stratified into head, torso and tail by traffic.

    LOG is one issued query per line, or a .tsv, .parquet or .jsonl with `query` and `count` columns. Queries are
    counted after folding case and whitespace; each stratum is sampled without replacement
    with probability proportional to count, and each sampled query gets the traffic weight
    it stands for. Prints the strata with their traffic shares and writes a queries table
    the pipeline reads (groups head, torso, tail).
    """
    import numpy as np

    from relgrade import query_sampling as querylog
    from relgrade.cli import render
    from relgrade.io.files import require_input_file, require_output_file, write_text
    from relgrade.io.querylog import read_query_log
    from relgrade.rng import derive_seed

    require_input_file(log_path, option="LOG")
    require_output_file(out_path, option="--out")
    shares = parse_allocation(allocation)
    querylog.check_shares(head_share, torso_share)
    seed = _seed(seed, params_path)
    log, lines = read_query_log(log_path)
    counts = querylog.strata(log, head_share=head_share, torso_share=torso_share,
                             path=log_path, lines=lines)
    rng = np.random.default_rng(derive_seed(seed, querylog.SEED_PURPOSE))
    sample = querylog.sample_queries(counts, n=n, allocation=shares, rng=rng)
    write_text(out_path, querylog.queries_tsv(sample))

    table = querylog.summary(counts, sample)
    total = int(table["traffic"].sum())
    click.echo(f"{log_path}: {total} issued queries, {len(counts)} distinct")
    rows = [[r.stratum, str(r.queries), str(r.traffic), f"{100 * r.share:.1f}%",
             str(r.sampled), "-" if r.sampled == 0 else f"{r.weight:.6g}"]
            for r in table.reset_index().itertuples(index=False)]
    click.echo("\n".join(render.table(["stratum", "queries", "traffic", "share", "sampled",
                                         "weight"], rows)))
    for r in table.reset_index().itertuples(index=False):
        if r.queries > 0 and r.sampled == 0:
            click.echo(f"note: the {r.stratum} ({r.queries} queries, {100 * r.share:.1f}% of the "
                       "traffic) is not sampled; weighted means cover the other strata only")
    n_eff = querylog.effective_size(sample["weight"])
    click.echo(f"sampled {len(sample)} queries (allocation {allocation}, seed {seed}); "
               f"effective size under the traffic weights {n_eff:.1f}")
    click.echo(f"wrote {out_path}; to use it set queries.groups: [head, torso, tail] "
               "(and metrics.weighted: true for traffic-weighted means) in the params file")


@queries_cmd.command("refresh")
@params_option
@click.option("--log", "log_path", required=True,
              type=click.Path(path_type=Path),
              help="The current query log the new queries are drawn from.")
@click.option("--share", type=float, required=True,
              help="The share of the query set to replace, between 0 and 1 (`relgrade drift` "
                   "recommends one).")
@handle_errors
def refresh_cmd(params_path, log_path, share):
    """Refresh a slice of the experiment's sampled query set from a current query log.

    Keeps the set as it stands in params sample.refresh.previous (a copy beside the set),
    copies LOG into the experiment's data/input and points queries.log at it, and writes
    sample.refresh (share, previous) into the params file, comments kept; the sample stage
    then replaces that share of the set with queries the sampler draws from LOG (seeded from
    params seed), keeps the rest and weights the whole set against LOG. Prints the queries
    retired and added, and what to run next. Nothing is written when anything is refused.
    """
    import shutil

    import numpy as np

    from relgrade import query_sampling as querylog
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.params_edit import edited_params
    from relgrade.io.files import (read_rows, read_utf8, require_input_file, sha256_file,
                                   write_text)
    from relgrade.io.querylog import read_query_log
    from relgrade.pipeline.registry import render
    from relgrade.query_sampling import refresh as refreshing
    from relgrade.rng import derive_seed

    require_input_file(log_path, option="--log")
    ex = Experiment.load(params_path)
    ex.params.need("queries.log")
    cfg = ex.params.need("sample")
    seed = ex.params.need("seed")
    set_path = ex.file(ex.params.queries.input)
    previous, _ = read_rows(set_path, ["query_id", "query"])
    refreshing.slice_size(share, len(previous), what="--share")
    log, lines = read_query_log(log_path)
    counts = querylog.strata(log, head_share=cfg.head_share, torso_share=cfg.torso_share,
                             path=log_path, lines=lines)
    root = ex.root.resolve()
    try:
        log_rel = log_path.resolve().relative_to(root).as_posix()
    except ValueError:
        log_rel = (Path(ex.params.queries.log).parent / log_path.name).as_posix()
    target = ex.file(log_rel)
    if target.exists() and target.resolve() != log_path.resolve() \
            and sha256_file(target) != sha256_file(log_path):
        raise InputError(f"{target.as_posix()} already holds another log", path=log_path,
                         fix="give the current log a name of its own (e.g. with its date)")
    kept_rel = (cfg.refresh.previous if cfg.refresh is not None else
                (Path(ex.params.queries.input).parent / "queries.previous.tsv").as_posix())
    preview = refreshing.refresh(previous, counts, share=share,
                                 rng=np.random.default_rng(
                                     derive_seed(seed, refreshing.SEED_PURPOSE)),
                                 what="--share")
    text = read_utf8(set_path)
    params_text, params = edited_params(ex.params.source, {
        "queries.log": log_rel, "sample.refresh": {"share": share, "previous": kept_rel}})
    dvc_yaml = ex.root / "dvc.yaml"
    pipeline = render(Experiment(ex.root, params)) \
        if dvc_yaml.exists() else None
    # everything is computed: now the writes, each only when it changes the file
    wrote, unchanged = [], []
    if target.resolve() == log_path.resolve() or (
            target.is_file() and sha256_file(target) == sha256_file(log_path)):
        unchanged.append(target.as_posix())
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log_path, target)
        wrote.append(target.as_posix())
    for path, new, what in ((ex.file(kept_rel), text, " (the set before the refresh)"),
                            (Path(ex.params.source), params_text,
                             " (queries.log and sample.refresh)"),
                            (dvc_yaml, pipeline, "")):
        if new is None:
            continue
        if path.is_file() and read_utf8(path) == new:
            unchanged.append(path.as_posix())
            continue
        write_text(path, new)
        wrote.append(path.as_posix() + what)

    queries = dict(zip(preview.table["query_id"], preview.table["query"]))
    click.echo(f"refresh: {preview.replaced} of {len(previous)} queries replaced from "
               f"{log_path.as_posix()} (share {share:g}); {preview.kept} kept")
    click.echo(f"  retired: {', '.join(preview.retired)}")
    if preview.gone:
        click.echo(f"  (no longer in the log: {', '.join(preview.gone)})")
    click.echo("  added: " + ", ".join(f"{q} ({queries[q]})" for q in preview.added))
    if wrote:
        click.echo(f"Wrote {', '.join(wrote)}")
    if unchanged:
        click.echo(f"Unchanged (nothing written): {', '.join(unchanged)}")
    files = sorted(name for name, arm in (ex.params.arms or {}).items()
                   if getattr(arm, "kind", None) == "file")
    if files:
        click.echo("note: the runs of arms of kind file must cover the refreshed set: "
                   f"{', '.join(files)} (run them again after `dvc repro "
                   f"{dvc_yaml.as_posix()}:queries`)")
    click.echo(f"next: dvc repro {dvc_yaml.as_posix()} (the sample stage draws this refresh; "
               "the new queries' intents, pool pairs and grades are then pending work, "
               "named by `relgrade status`)")
