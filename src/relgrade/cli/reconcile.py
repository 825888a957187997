"""``relgrade reconcile``: why an A/B test disagrees with the offline verdict.

Reads the experiment's per-query values, key, runs and pool provenance, an A/B result file
(:mod:`relgrade.io.abtest`), optionally a query-to-segment table and a current query log;
computes the five checks and their ranked conclusion
(:func:`relgrade.evaluation.reconcile.reconcile`); prints them and writes
``metrics/reconcile.json`` and ``metrics/reconcile.md`` beside the comparison report. Every
input is read and checked before anything is written.
"""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError

# existence and kind are checked by the command itself, so a missing file or a folder is one
# `Error:` line (relgrade.io.files.require_input_file), not a usage error
_file = click.Path(path_type=Path)


@click.command("reconcile")
@params_option
@click.option("--ab", "ab_path", type=_file, required=True,
              help="The A/B result: JSON Lines with control, treatment, metric, delta, low, "
                   "high (relative changes: 0.024 is +2.4%) and optional segment lines.")
@click.option("--segments", "segments_path", type=_file, default=None,
              help="A table of query_id and segment (.tsv, .jsonl or .parquet) placing every "
                   "query in the A/B test's segments (default: the query groups).")
@click.option("--query-log", "log_path", type=_file, default=None,
              help="The current query log (as for relgrade queries sample): also check "
                   "query-set drift.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors
def reconcile_cmd(params_path, ab_path, segments_path, log_path, as_json):
    """Reconcile the offline verdict with an A/B test's result: the five checks.

    In the order they are usually worth investigating: pool bias (Judged@k per arm, the
    share of each arm's top k no other arm found, each arm re-scored without the pairs only
    it pooled, the difference on judged chunks only); query-set drift (with --query-log);
    cutoff mismatch (the verdict at the shallower cutoffs against the primary measure's);
    power (the offline interval, and the queries needed to detect the online change);
    segment cancellation (per-group differences with their own intervals, offline and
    online). Then the explanations the numbers support, most supported first.

    Writes metrics/reconcile.json and metrics/reconcile.md beside the comparison report.
    """
    import json

    from relgrade.evaluation import compare as cmp
    from relgrade.evaluation import reconcile as rec
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import repro_command
    from relgrade.io import files as io
    from relgrade.io.abtest import read_ab_result

    for path, option in ((ab_path, "--ab"), (segments_path, "--segments"),
                         (log_path, "--query-log")):
        if path is not None:
            io.require_input_file(path, option=option)
    ex = Experiment.load(params_path)
    p = ex.params
    arms = sorted(map(str, p.need("arms")))
    online, segments = read_ab_result(ab_path, arms=arms)
    inputs = ex.compare_inputs(full=False)
    per_query = inputs["per_query"]
    if segments_path is not None:
        per_query = _with_segments(per_query, segments_path)
    if segments:
        known = set(per_query["group"].astype(str)) if "group" in per_query.columns else set()
        for s in segments:
            if s["segment"] not in known:
                raise InputError("segment has no queries in the experiment", path=ab_path,
                                 line=s["line"], item=s["segment"],
                                 fix="Segments: " + ", ".join(sorted(known))
                                     + " (or place the queries with --segments FILE)")
    metrics = p.need("metrics")
    primary = metrics.primary or "nDCG(dcg='exp-log2')@10"
    shallow = rec.shallow_measures(primary, metrics.cutoffs, sorted(per_query["measure"].unique()))
    if primary not in set(per_query["measure"]):
        raise InputError("the primary measure has no per-query values", item=primary,
                         fix=f"Run the metrics stage first: {repro_command(ex, 'metrics')}")
    drift = None
    if log_path is not None:
        drift = _drift(ex, log_path, p)
    settings = inputs["settings"]
    pair = (online["treatment"], online["control"])
    comparison = cmp.compare_arms(per_query, settings=settings, pairs=[pair],
                                  measures=[*shallow, primary], weights=inputs.get("weights"))
    provenance = None
    if ex.path("provenance").exists():
        provenance = io.read_table(ex.path("provenance"))
    runs = inputs.get("runs")
    result = rec.reconcile(
        comparison=comparison, per_query=per_query, online=_plain(online),
        online_segments=[_plain(s) for s in segments], primary=primary,
        cutoffs=list(metrics.cutoffs), qrels=inputs.get("qrels"), runs=runs,
        provenance=provenance, depth=p.pool.depth if p.pool is not None else None,
        drift=drift, power=settings.power, alpha=settings.alpha, ties=inputs["ties"],
        relevant_min=inputs["relevant_min"])
    result = rec.jsonable(result | {"inputs": {
        "ab": {"path": ab_path.as_posix(), "sha256": io.sha256_file(ab_path)},
        "segments": None if segments_path is None else {
            "path": segments_path.as_posix(), "sha256": io.sha256_file(segments_path)},
        "query_log": None if log_path is None else {
            "path": log_path.as_posix(), "sha256": io.sha256_file(log_path)},
        "key_sha256": (inputs.get("record") or {}).get("key_sha256"),
        "pool_version": (inputs.get("record") or {}).get("pool_version"),
        "seed": settings.seed, "bootstrap": settings.n_resamples}})
    if p.grading.mode == "ppi":  # the per-query values are the model key's: say so first
        click.echo("ppi mode: the offline numbers below are the model key's alone "
                   "(model-only); the decision is PPI++'s (metrics/comparisons.json)", err=True)
    text = json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    md = rec.markdown(result)
    out = ex.path("comparisons").parent
    io.write_text(out / "reconcile.json", text)
    io.write_text(out / "reconcile.md", md)
    click.echo(text if as_json else md, nl=False)


def _plain(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "line"}


def _with_segments(per_query, path):
    """The per-query table with ``group`` replaced by each query's segment from ``path``."""
    from relgrade.io.files import read_rows

    table, lines = read_rows(path, ["query_id", "segment"])
    seen = {}
    for i, (q, s) in enumerate(zip(table["query_id"].astype(str), table["segment"].astype(str))):
        line = None if lines is None else lines[i]
        if q in seen:
            raise InputError("a query is placed in two segments", path=path, line=line,
                             item=f"query {q}", fix=f"first at line {seen[q][1]}")
        if not s.strip():
            raise InputError("segment must be non-empty text", path=path, line=line,
                             item=f"query {q}")
        seen[q] = (s, line)
    missing = sorted(set(per_query["query_id"].astype(str)) - set(seen))
    if missing:
        raise InputError("a query of the experiment has no segment", path=path,
                         item=f"query {missing[0]}", fix="place every query in a segment")
    return per_query.assign(group=per_query["query_id"].astype(str).map(
        {q: s for q, (s, _) in seen.items()}))


def _drift(ex, log_path, p):
    """:func:`relgrade.query_sampling.query_set_drift` of the experiment's query set
    against the log at ``log_path`` (counted as ``relgrade queries sample`` counts it), with
    the strata distance ``relgrade drift`` prints
    (:func:`relgrade.experiment.query_drift.measure`) when the set was sampled from a log
    (params ``queries.log``), else None."""
    from relgrade import query_sampling
    from relgrade.experiment import query_drift
    from relgrade.io import files as io
    from relgrade.io.querylog import read_query_log

    log, lines = read_query_log(log_path)
    if len(log) == 0:
        raise InputError("the query log holds no queries", path=log_path,
                         fix="Give a log with at least one issued query")
    shares = p.sample if p.sample is not None else None
    counted = query_sampling.strata(
        log, head_share=shares.head_share if shares else 0.5,
        torso_share=shares.torso_share if shares else 0.3, path=log_path, lines=lines)
    queries = io.read_table(ex.path("queries"), columns=["query_id", "query"])
    out = query_sampling.query_set_drift(queries, counted)
    if p.queries is None or not p.queries.log:
        return out | {"distance": None, "distance_interval": None}
    measured = query_drift.measure(ex, log_path)
    return out | {"distance": measured.total_variation,
                  "distance_interval": list(measured.interval)}
