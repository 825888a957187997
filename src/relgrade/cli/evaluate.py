"""``relgrade evaluate QRELS RUN [RUN...]``: measures of runs against qrels, like trec_eval."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pandas as pd

from relgrade.cli.options import format_option, parse_scale, scale_option
from relgrade.cli.render import handle_errors, number, table
from relgrade.evaluation import metrics
from relgrade.evaluation.measures import parse_measure
from relgrade.io.judgments import read_judgments
from relgrade.io.runs import read_run
from relgrade.ranking import validate_run

DEFAULT_MEASURES = ("nDCG(dcg='exp-log2')@10", "R@10", "RR@10", "Judged@10")


def _run_names(paths: list[Path]) -> list[str]:
    stems = [p.stem for p in paths]
    return [p.as_posix() if stems.count(p.stem) > 1 else p.stem for p in paths]


@click.command("evaluate")
@click.argument("qrels_path", metavar="QRELS",
                type=click.Path(dir_okay=False, path_type=Path))
@click.argument("run_paths", metavar="RUN...", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("-m", "--measure", "measure_names", multiple=True,
              help="A measure in ir_measures' notation, e.g. \"nDCG(dcg='exp-log2')@10\", "
                   "nDCG@10, R@100, RR@10, P@5, Judged@10, R(rel=2)@10. Repeatable. "
                   f"Default: {', '.join(DEFAULT_MEASURES)}.")
@click.option("--per-query", is_flag=True, help="Also print each query's value.")
@format_option(json_help="Print one JSON document instead.")
@click.option("--ties", type=click.Choice(["score", "rank"]), default="score",
              show_default=True,
              help="score: trec_eval's order (score descending, then chunk id descending); "
                   "rank: the run's rank column.")
@click.option("--missing", type=click.Choice(["zero", "skip"]), default="zero",
              show_default=True,
              help="A query of the qrels that a run does not answer: scores 0 (zero) or is "
                   "left out as trec_eval does (skip).")
@click.option("--relevant-min", type=int, default=1, show_default=True,
              help="Lowest grade that counts as relevant for measures that do not say rel=.")
@scale_option(default=None,
              help="The grade scale, comma-separated (e.g. 0,1,2): a qrels grade off it is an "
                   "error. Default: any integer grade.")
@handle_errors
def evaluate_cmd(qrels_path, run_paths, measure_names, per_query, as_json, ties, missing,
                 relevant_min, scale):
    """Score each RUN against QRELS: one row per run, one column per measure.

    QRELS is TREC qrels (qid iter docid grade), a JSONL key or Parquet, read by the rules of
    every judgment file (docs/formats.md): an empty file is an error; each RUN is a TREC
    run, JSONL or Parquet, named by its file name without extension. Values are printed in
    full precision. A query whose qrels hold nothing relevant is left out of nDCG, R, RR
    and P, and the output says how many were.
    """
    measures = [parse_measure(m, relevant_min=relevant_min)
                for m in (measure_names or DEFAULT_MEASURES)]
    names = [str(m) for m in measures]
    qrels = read_judgments(qrels_path, scale=parse_scale(scale))[["query_id", "chunk_id",
                                                                  "grade"]]
    key = metrics.index_qrels(qrels)
    excluded = metrics.excluded_queries(qrels, measures)
    n_queries = key.n_queries
    known = set(key.query_ids.to_pylist())
    results, tables, answered = {}, [], {}
    for name, path in zip(_run_names(list(run_paths)), run_paths):
        run = read_run(path)
        validate_run(run, path=path)
        pq = metrics.per_query(qrels=key, run=run, measures=measures,
                               on_missing_query=missing, ties=ties)
        means = metrics.mean(pq).reindex(names)
        results[name] = {m: (None if v != v else float(v)) for m, v in means.items()}
        answered[name] = len(known.intersection(run["query_id"].astype("str").unique()))
        if per_query:
            tables.append(pq.assign(run=name))
    notes = _notes(excluded, n_queries, answered, missing)
    if as_json:
        doc = {"measures": names, "queries": n_queries, "ties": ties, "missing": missing,
               "runs": results,
               "excluded": {m: q for m, q in excluded.items() if q}}
        if per_query:
            doc["per_query"] = [
                {"run": r, "query_id": q, "measure": m, "value": float(v)}
                for r, q, m, v in pd.concat(tables)[["run", "query_id", "measure", "value"]]
                .itertuples(index=False)]
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    if per_query:
        rows = [[r, q, m, number(v, digits=None)] for r, q, m, v in
                pd.concat(tables)[["run", "query_id", "measure", "value"]].itertuples(index=False)]
        click.echo("\n".join(table(["run", "query_id", "measure", "value"], rows)))
        click.echo()
    rows = [[name] + [number(results[name][m], digits=None) for m in names] for name in results]
    click.echo("\n".join(table(["run"] + names, rows)))
    for note in notes:
        click.echo(note)


def _notes(excluded: dict, n_queries: int, answered: dict, missing: str) -> list[str]:
    notes = []
    groups: dict[tuple, list[str]] = {}
    for m, queries in excluded.items():
        if queries:
            groups.setdefault(tuple(queries), []).append(m)
    for queries, ms in groups.items():
        shown = ", ".join(queries[:10]) + (", ..." if len(queries) > 10 else "")
        notes.append(f"Note: {len(queries)} of {n_queries} queries excluded from "
                     f"{', '.join(ms)}: nothing relevant in the qrels ({shown}).")
    for name, n in answered.items():
        if n < n_queries:
            what = "score 0" if missing == "zero" else "are left out"
            notes.append(f"Note: run {name} answers {n} of {n_queries} queries; "
                         f"the other {n_queries - n} {what}.")
    return notes
