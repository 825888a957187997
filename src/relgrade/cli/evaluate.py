"""``relgrade evaluate QRELS RUN [RUN...]``: measures of runs against qrels, like trec_eval."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import click

from relgrade.cli.options import format_option, parse_scale, scale_option
from relgrade.cli.render import handle_errors, number, table

DEFAULT_MEASURES = ("nDCG(dcg='exp-log2')@10", "R@10", "RR@10", "Judged@10")
INFERRED_MEASURES = ("xinfAP", "infNDCG")
#: How to fix an empty run file given to the command (there are no arms here).
EMPTY_RUN_FIX = ("Give the run at least one ranked chunk, or leave the file out of "
                 "`relgrade evaluate`")
#: The engines ``--engine`` names.
ENGINES = ("local", "spark")


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
                   "nDCG@10, AP, R@100, RR@10, P@5, Rprec, Bpref, Success@5, RBP(p=0.9), "
                   "IPrec@0.5, Judged@10, R(rel=2)@10; or trec_eval's: map, P.5,10, "
                   "ndcg_cut.10, recip_rank, num_rel_ret, unj.5. Repeatable. "
                   f"Default: {', '.join(DEFAULT_MEASURES)}.")
@click.option("--inclusion", "inclusion_path", metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="A sampled pool's inclusion probabilities, for xinfAP and infNDCG: "
                   "sample_eval.pl's qrels lines `qid iter docid stratum rel`, optionally "
                   "followed by the pair's probability, or a Parquet table with query_id, "
                   "chunk_id, inclusion_prob (relgrade's pool). Without -m, xinfAP and "
                   "infNDCG are added to the default measures.")
@click.option("--per-query", is_flag=True, help="Also print each query's value.")
@format_option(json_help="Print one JSON document instead.")
@click.option("--trec-eval-output", "trec_output", is_flag=True,
              help="Print trec_eval's `measure  query  value` lines instead of a table "
                   "(with --per-query, each query's lines before `all`); notes go to stderr.")
@click.option("--ties", type=click.Choice(["score", "rank"]), default="score",
              show_default=True,
              help="score: trec_eval's order (score descending, then chunk id descending); "
                   "rank: the run's rank column.")
@click.option("--missing", type=click.Choice(["zero", "skip"]), default="zero",
              show_default=True,
              help="A query of the qrels that a run does not answer: scores 0 (zero, "
                   "trec_eval -c) or is left out (skip, trec_eval without -c).")
@click.option("--no-relevant", "no_relevant", type=click.Choice(["exclude", "zero"]),
              default="exclude", show_default=True,
              help="A query with nothing relevant in the qrels: left out of the measures "
                   "that need something relevant (exclude, reported in a note) or scored 0 "
                   "as trec_eval does (zero).")
@click.option("--relevant-min", type=int, default=1, show_default=True,
              help="Lowest grade that counts as relevant for measures that do not say rel= "
                   "(trec_eval -l).")
@click.option("--engine", type=click.Choice(list(ENGINES)), default="local",
              show_default=True,
              help="Where the runs and qrels are read, checked, ranked and joined: local "
                   "(Arrow and numpy in this process) or spark (Spark SQL, for TREC files "
                   "that live in a lake; needs the spark extra and Java 17+). The measures "
                   "and the output are the same.")
@click.option("--spark-master", default=None, metavar="URL",
              help="Spark's master URL with --engine spark (default: local[2]); e.g. "
                   "spark://host:7077, yarn, k8s://...")
@scale_option(default=None,
              help="The grade scale, comma-separated (e.g. 0,1,2): a qrels grade off it is an "
                   "error. Default: any integer grade.")
@handle_errors
def evaluate_cmd(qrels_path, run_paths, measure_names, inclusion_path, per_query, as_json,
                 trec_output, ties, missing, no_relevant, relevant_min, engine, spark_master,
                 scale):
    """Score each RUN against QRELS: one row per run, one column per measure.

    QRELS is TREC qrels (qid iter docid grade), a JSONL key or Parquet, read by the rules of
    every judgment file (docs/formats.md): an empty file is an error; each RUN is a TREC
    run, JSONL or Parquet, named by its file name without extension. Fields after the sixth
    on a run line are ignored, as trec_eval ignores them. Values are printed in full
    precision. A query whose qrels hold nothing relevant is left out of the measures that
    need something relevant, and the output says how many were (--no-relevant zero scores
    it 0 instead).
    """
    with _system_allocator():
        _evaluate(qrels_path, run_paths, measure_names, inclusion_path, per_query, as_json,
                  trec_output, ties, missing, no_relevant, relevant_min, engine, spark_master,
                  scale)


@contextlib.contextmanager
def _system_allocator():
    """Arrow's buffers from the C library's allocator (``pyarrow.system_memory_pool``)
    while the command runs, the previous default pool put back afterwards.

    Arrow's default allocator (mimalloc in pyarrow's wheels) keeps pages it has freed for
    later use; over the qrels' checks and ten runs' scans, joins and conversions they add
    about 25 MiB to the command's peak, at no measurable gain in CPU time
    (benchmarks/README.md, "relgrade evaluate's peak memory"). Buffers keep the pool they
    came from, so a table made before or after the command is unaffected.
    """
    import pyarrow as pa

    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(before)


def _evaluate(qrels_path, run_paths, measure_names, inclusion_path, per_query, as_json,
              trec_output, ties, missing, no_relevant, relevant_min, engine, spark_master,
              scale):
    """``relgrade evaluate``'s work, as :func:`evaluate_cmd` describes it."""
    # heavy libraries are imported here, so `relgrade --help` does not pay for them; pandas
    # is not among them: TREC qrels and runs are read, checked and scored on Arrow and
    # numpy columns (other formats are read through pandas, imported by their readers)
    from relgrade.evaluation import metrics
    from relgrade.evaluation.measures import parse_measures
    from relgrade.io.judgments import read_judgment_table
    from relgrade.io.runs import run_lines
    from relgrade.io.runcolumns import read_run_columns
    from relgrade.io.trec import extra_fields_note, read_inclusion
    from relgrade.io.trec_scan import worth_scanning
    from relgrade.ranking import validate_run

    if as_json and trec_output:
        raise click.UsageError("--json and --trec-eval-output exclude each other")
    if spark_master is not None and engine != "spark":
        raise click.UsageError("--spark-master needs --engine spark")
    defaults = DEFAULT_MEASURES + (INFERRED_MEASURES if inclusion_path else ())
    measures = parse_measures(measure_names or defaults, relevant_min=relevant_min)
    names = [str(m) for m in measures]
    if engine == "spark" and (inclusion_path is not None
                              or any(m.needs_inclusion for m in measures)):
        raise click.UsageError("--engine spark does not score xinfAP or infNDCG "
                               "(--inclusion): use --engine local")
    spark_rows = None
    if engine == "spark":
        from relgrade.tables import spark, spark_scoring

        depth, levels = metrics.ranked_reads(measures)
        spark_rows = spark_scoring.ranked_rows(
            spark.session(spark_master or spark.DEFAULT_MASTER, app_name="relgrade-evaluate"),
            qrels_path, list(run_paths), ties=ties, depth=depth, levels=levels,
            scale=parse_scale(scale))
    # Spark's rows, or the local engine's reading, whose rules and messages decide whenever
    # Spark leaves an input to them
    if spark_rows is not None:
        qrels = spark_rows.qrels.to_pandas()
    else:
        qrels = read_judgment_table(qrels_path, scale=parse_scale(scale))
    # the qrels reader refuses a pair graded twice, naming its lines: not looked for again
    key = metrics.index_qrels(qrels, pairs_checked=spark_rows is None)
    del qrels
    key_prob = None
    inferred = [str(m) for m in measures if m.needs_inclusion]
    if inferred or inclusion_path is not None:
        # indexed once, before any run is read: a bad table is refused before any output
        inclusion = read_inclusion(inclusion_path) if inclusion_path is not None else None
        key_prob = metrics.inclusion_at(key, inclusion, path=inclusion_path,
                                        measure=(inferred or ["xinfAP"])[0])
        del inclusion
    excluded = metrics.excluded_queries(key, measures) if no_relevant == "exclude" else {}
    n_queries = key.n_queries
    # TREC runs read, coded and checked for repeats in one compiled pass (the C scan; Arrow's
    # reader where the package was installed without it)
    scan = spark_rows is None and worth_scanning(run_paths)
    results, tables, answered, unknown, extra = {}, {}, {}, {}, {}
    for i, (name, path) in enumerate(zip(_run_names(list(run_paths)), run_paths)):
        if spark_rows is not None:
            ranked = spark_rows.runs[i]
            pq = metrics.per_query_ranked(qrels=key, ranked=ranked.rows, measures=measures,
                                          on_missing_query=missing, no_relevant=no_relevant)
            answered[name], unknown[name] = ranked.answered, ranked.unknown
            extra[str(path)] = None  # Spark reads six fields a line or leaves the run
        else:
            # one arm's ids coded once: the duplicate check, the qrels join and the
            # coverage note share them (a file with an arm column is checked as it is)
            run, codes = read_run_columns(path, scan=scan)
            validate_run(run, path=path, codes=codes, lines=run_lines(path),
                         empty_fix=EMPTY_RUN_FIX)
            extra[str(path)] = extra_fields_note(path, run)
            # one arm's rows as an Arrow table; a file with an arm column (read by pandas)
            # is scored arm by arm into a DataFrame
            score = metrics.per_query if codes is None else metrics.per_query_table
            pq = score(qrels=key, run=run, measures=measures, on_missing_query=missing,
                       ties=ties, no_relevant=no_relevant, inclusion=key_prob, codes=codes)
            answered[name], unknown[name] = metrics.query_coverage(key, run, codes=codes)
            del run, codes
        results[name] = _means(metrics, pq, names)
        if per_query or trec_output:
            tables[name] = pq
    notes = _notes(excluded, n_queries, answered, unknown, extra, missing)
    if trec_output:
        for name, path in zip(results, run_paths):
            click.echo("\n".join(_trec_lines(_runid(path, name), _rows(tables[name]),
                                              measures, per_query)))
        for note in notes:
            click.echo(note, err=True)
        return
    if as_json:
        doc = {"measures": names, "queries": n_queries, "ties": ties, "missing": missing,
               "no_relevant": no_relevant, "runs": results,
               "excluded": {m: q for m, q in excluded.items() if q}}
        if per_query:
            doc["per_query"] = [
                {"run": r, "query_id": q, "measure": m, "value": float(v)}
                for r, pq in tables.items() for q, m, v in _rows(pq)]
        click.echo(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    if per_query:
        rows = [[r, q, m, number(v, digits=None)] for r, pq in tables.items()
                for q, m, v in _rows(pq)]
        click.echo("\n".join(table(["run", "query_id", "measure", "value"], rows)))
        click.echo()
    rows = [[name] + [number(results[name][m], digits=None) for m in names] for name in results]
    click.echo("\n".join(table(["run"] + names, rows)))
    for note in notes:
        click.echo(note)


def _means(metrics, pq, names: list[str]) -> dict:
    """Each measure's mean over its queries (None when no query counts), in ``names``'
    order: :func:`relgrade.evaluation.metrics.mean`'s values."""
    if hasattr(pq, "column_names"):  # an Arrow table
        means = metrics.measure_means(pq)
        values = [means.get(m) for m in names]
    else:
        values = metrics.mean(pq).reindex(names).tolist()
    return {m: (None if v is None or v != v else float(v)) for m, v in zip(names, values)}


def _rows(pq) -> list[tuple]:
    """The per-query table's ``(query_id, measure, value)`` rows, in its order, as Python
    objects."""
    if hasattr(pq, "column_names"):  # an Arrow table
        return list(zip(pq["query_id"].to_pylist(), pq["measure"].to_pylist(),
                        pq["value"].to_pylist()))
    return list(pq[["query_id", "measure", "value"]].itertuples(index=False))


def _runid(path: Path, name: str) -> str:
    """What trec_eval prints on a run's ``runid`` line: the tag (sixth field) of a TREC run's
    last line (:func:`relgrade.io.trec.last_run_tag`), as trec_eval keeps it whatever tags
    the other lines hold; ``name`` for a JSONL or Parquet run, which has no tag, and for a
    path this machine cannot open (a run Spark read from a lake)."""
    from relgrade.io.trec import last_run_tag

    if Path(path).suffix.lower() in (".jsonl", ".ndjson", ".parquet"):  # read_run's rule
        return name
    try:
        return last_run_tag(path) or name
    except OSError:
        return name


def _trec_lines(run_name: str, rows: list[tuple], measures, per_query: bool) -> list[str]:
    """trec_eval's output lines for one run: ``name<TAB>query<TAB>value``, name padded;
    ``run_name`` goes on the ``runid`` line. ``rows``: :func:`_rows` of its per-query
    table."""
    import numpy as np

    from relgrade.evaluation.measures import trec_eval_name

    printed = {str(m): trec_eval_name(m) or str(m) for m in measures}
    counts = {str(m) for m in measures if m.name in ("NumRet", "NumRel")}

    def line(measure: str, qid: str, value: float, total: bool = False) -> str:
        text = f"{value:.0f}" if measure in counts else f"{value:.4f}"
        return f"{printed[measure]:<22}\t{qid}\t{text}"

    out = []
    if per_query:
        order = {name: i for i, name in enumerate(printed)}
        out += [line(m, q, v) for q, m, v in sorted(rows, key=lambda r: (r[0], order[r[1]]))]
    out.append(f"{'runid':<22}\tall\t{run_name}")
    out.append(f"{'num_q':<22}\tall\t{len({q for q, _, _ in rows})}")
    for measure in printed:
        values = np.array([v for _, m, v in rows if m == measure], dtype=np.float64)
        if not len(values):
            continue
        # trec_eval sums the counts over queries and averages everything else: numpy's sum
        # (NaN as 0), and the mean as that sum over the values that are not NaN, as
        # pandas' Series.sum and Series.mean make them
        valid = ~np.isnan(values)
        total = np.where(valid, values, 0.0).sum() if not valid.all() else values.sum()
        out.append(line(measure, "all", total if measure in counts else total / valid.sum()))
    return out


def _notes(excluded: dict, n_queries: int, answered: dict, unknown: dict, extra: dict,
           missing: str) -> list[str]:
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
    for name, (count, first) in unknown.items():
        if count:
            notes.append(f"Note: run {name} answers {count} "
                         f"{'query' if count == 1 else 'queries'} that the qrels do not hold "
                         f"(e.g. {first}); they are ignored.")
    notes += [note for note in extra.values() if note]
    return notes
