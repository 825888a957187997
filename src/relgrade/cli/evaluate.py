"""``relgrade evaluate QRELS RUN [RUN...]``: measures of runs against qrels, like trec_eval."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pandas as pd

from relgrade.cli import handle_errors
from relgrade.errors import InputError
from relgrade.evaluation import metrics
from relgrade.evaluation.measures import parse_measure
from relgrade.io.files import BOM, iter_jsonl, read_table
from relgrade.io.runs import read_run
from relgrade.io.trec import read_trec_qrels
from relgrade.ranking import validate_run

DEFAULT_MEASURES = ("nDCG(dcg='exp-log2')@10", "R@10", "RR@10", "Judged@10")


def read_qrels(path) -> pd.DataFrame:
    """Qrels from TREC qrels, a JSONL key (``query_id``, ``chunk_id``, ``grade``) or Parquet.

    JSON Lines is recognised by a ``.jsonl``/``.ndjson`` extension or a first line that is
    a JSON object; ``.parquet`` by its extension; anything else is TREC qrels.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        df = read_table(path, columns=["query_id", "chunk_id", "grade"])
        return df[["query_id", "chunk_id", "grade"]]
    if suffix in (".jsonl", ".ndjson") or _starts_with_object(path):
        rows = []
        for line, obj in iter_jsonl(path):
            try:
                q, c, g = obj["query_id"], obj["chunk_id"], obj["grade"]
            except KeyError as e:
                raise InputError("a key row needs query_id, chunk_id and grade", path=path,
                                 line=line, found=f"no {e.args[0]}") from None
            if isinstance(g, bool) or not isinstance(g, int):
                raise InputError("grade must be an integer", path=path, line=line,
                                 found=json.dumps(g))
            rows.append((str(q), str(c), g))
        return pd.DataFrame(rows, columns=["query_id", "chunk_id", "grade"]).astype(
            {"query_id": "str", "chunk_id": "str", "grade": "int64"})
    return read_trec_qrels(path)


def _starts_with_object(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 12)
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except IsADirectoryError:
        raise InputError("is a folder, not a file", path=path) from None
    return head.removeprefix(BOM).lstrip().startswith(b"{")


def _run_names(paths: list[Path]) -> list[str]:
    stems = [p.stem for p in paths]
    return [p.as_posix() if stems.count(p.stem) > 1 else p.stem for p in paths]


def _number(value) -> str:
    return "undefined" if value is None or value != value else repr(float(value))


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
             for row in [header] + rows]
    return "\n".join(lines)


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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead.")
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
@handle_errors
def evaluate_cmd(qrels_path, run_paths, measure_names, per_query, as_json, ties, missing,
                 relevant_min):
    """Score each RUN against QRELS: one row per run, one column per measure.

    QRELS is TREC qrels (qid iter docid grade), a JSONL key or Parquet; each RUN is a TREC
    run, JSONL or Parquet, named by its file name without extension. Values are printed in
    full precision. A query whose qrels hold nothing relevant is left out of nDCG, R, RR
    and P, and the output says how many were.
    """
    measures = [parse_measure(m, relevant_min=relevant_min)
                for m in (measure_names or DEFAULT_MEASURES)]
    names = [str(m) for m in measures]
    qrels = read_qrels(qrels_path)
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
        rows = [[r, q, m, _number(v)] for r, q, m, v in
                pd.concat(tables)[["run", "query_id", "measure", "value"]].itertuples(index=False)]
        click.echo(_table(["run", "query_id", "measure", "value"], rows))
        click.echo()
    rows = [[name] + [_number(results[name][m]) for m in names] for name in results]
    click.echo(_table(["run"] + names, rows))
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
