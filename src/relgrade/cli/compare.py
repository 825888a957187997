"""``relgrade compare``: is one arm or run better than another, and how sure is that?

Two ways in, one computation (:func:`relgrade.evaluation.compare.compare_arms`):

- ``relgrade compare ARM_A ARM_B``, inside an experiment: the per-query values the metrics
  stage wrote, read through :meth:`relgrade.experiment.files.Experiment.compare_inputs` as
  the ``compare`` stage reads them; the statistics settings come from params.
- ``relgrade compare --qrels QRELS RUN_A RUN_B [RUN...]`` or ``--per-query FILE``, on plain
  files without an experiment: the runs are scored here (as ``relgrade evaluate`` scores
  them), or the per-query values are read from any measure table; the statistics settings
  come from options.
"""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError

#: Measures compared on plain files when no -m is given (Judged@k describes the pool, not
#: the ranking, and is never compared).
DEFAULT_MEASURES = ("nDCG(dcg='exp-log2')@10", "R@10", "RR@10")

#: Options that only make sense on plain files: inside an experiment params sets them.
PLAIN_ONLY = ("seed", "bootstrap", "permutations", "level", "alpha", "power",
              "min_relative_change", "interval", "verdict_test", "baseline", "all_pairs",
              "groups_path", "ties", "relevant_min")

_unit = click.FloatRange(0, 1, min_open=True, max_open=True)


@click.command("compare")
@click.argument("names", nargs=-1, metavar="ARM_A ARM_B | RUN_A RUN_B [RUN...]")
@click.option("--qrels", "qrels_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="Compare the RUN files given as arguments against these qrels, without an "
                   "experiment (TREC qrels, JSONL key or Parquet).")
@click.option("--per-query", "per_query_paths", multiple=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Compare per-query values from a measure table instead (.tsv, .jsonl or "
                   ".parquet with query_id, measure, value and optionally run or arm, and "
                   "group); a file without a run column is one run named after the file. "
                   "Repeatable. Arguments, if any, pick the runs to compare.")
@click.option("--groups", "groups_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="A table of query_id and group (.tsv, .jsonl or .parquet): also report "
                   "each difference per query group.")
@click.option("--measure", "-m", "measure_names", multiple=True,
              help="A measure, e.g. \"nDCG(dcg='exp-log2')@10\". Repeatable on plain files "
                   f"(default: {', '.join(DEFAULT_MEASURES)}); one measure inside an "
                   "experiment (default: every measure except Judged@k).")
@click.option("--baseline", default=None,
              help="Plain files: the run every other run is compared with (default: the "
                   "first run).")
@click.option("--all-pairs", is_flag=True,
              help="Plain files: compare every pair of runs, not only each run with the "
                   "baseline.")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Plain files: seed of the bootstrap and randomization draws (default 0); "
                   "recorded in the output.")
@click.option("--bootstrap", type=click.IntRange(min=1), default=None,
              help="Plain files: bootstrap resamples (default 10000).")
@click.option("--permutations", type=click.IntRange(min=1), default=None,
              help="Plain files: sign-flip patterns of the randomization test (default "
                   "10000).")
@click.option("--interval", type=click.Choice(["auto", "t", "bootstrap-t", "bca",
                                               "percentile"]), default=None,
              help="Plain files: interval method (default auto: Student t below 30 queries "
                   "off the most common value, studentized bootstrap from there).")
@click.option("--test", "verdict_test", type=click.Choice(["mean", "sign-flip"]), default=None,
              help="Plain files: the verdict's test under Holm (default mean: mean difference "
                   "0; sign-flip assumes each difference symmetric about 0).")
@click.option("--level", type=_unit, default=None,
              help="Plain files: confidence level of the intervals (default 0.95).")
@click.option("--alpha", type=_unit, default=None,
              help="Plain files: significance level of the Holm-adjusted p-values (default "
                   "0.05).")
@click.option("--power", type=_unit, default=None,
              help="Plain files: power of the queries-needed estimate (default 0.8).")
@click.option("--min-relative-change", type=click.FloatRange(0, min_open=True), default=None,
              help="Plain files: the relative change the queries-needed estimate targets "
                   "(default 0.02).")
@click.option("--ties", type=click.Choice(["score", "rank"]), default=None,
              help="With --qrels: run order by score as trec_eval does (default) or by the "
                   "rank column.")
@click.option("--relevant-min", type=int, default=None,
              help="With --qrels: lowest relevant grade for measures that do not say rel= "
                   "(default 1).")
@click.option("--json", "fmt", flag_value="json", help="Print the comparison as JSON.")
@click.option("--markdown", "fmt", flag_value="markdown", help="Print a Markdown report.")
@click.option("--latex", "fmt", flag_value="latex",
              help="Print a LaTeX table (booktabs): runs by measures, significant "
                   "improvements as superscripts.")
@params_option
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Threads to use (default: chosen by the amount of work). Never changes "
                   "a number.")
@handle_errors
def compare_cmd(names, qrels_path, per_query_paths, measure_names, fmt, params_path, workers,
                **plain):
    """Paired statistics between arms of the experiment, or between runs on plain files.

    Inside an experiment, `relgrade compare ARM_A ARM_B` reads the per-query values the
    metrics stage wrote and compares ARM_A against ARM_B. Holm runs over the same family as
    the compare stage (params metrics.pairs, every measure), plus this pair if the design
    does not already hold it, so the numbers equal those in metrics/comparisons.json. With
    the key, runs, grades and audit present, the verdict also weighs the label-noise band.
    In ppi mode these are the model key's numbers alone (model-only): a first line says so
    (on stderr for --format json and latex) and each verdict line starts "model-only, not a
    decision:"; the decision there is PPI++'s (relgrade metrics show).

    On plain files, `relgrade compare --qrels QRELS RUN_A RUN_B [RUN...]` scores each run
    (a query a run does not answer scores 0; a query with nothing relevant in the qrels is
    left out of the measures that need a relevant document) and compares each run with the
    baseline (--baseline, default the first run) or every pair (--all-pairs);
    `relgrade compare --per-query FILE` does the same from per-query values already
    computed. Holm runs over every comparison made.

    Either way it prints each arm's mean with its confidence interval and the
    queries needed to detect a --min-relative-change; then per comparison the paired
    difference with its interval, the sign-flip randomization p-value, the verdict test's
    p-value after Holm's correction, the paired t test, Cohen's d_z, the queries needed, per-group
    differences (with a query group table) and a one-line verdict per measure.
    """
    if qrels_path is not None or per_query_paths:
        _compare_files(names, qrels_path, per_query_paths, measure_names, fmt, workers, plain)
        return
    given = ["--test" if k == "verdict_test" else
             f"--{k.replace('_', '-').removesuffix('-path')}" for k in PLAIN_ONLY
             if plain.get(k) not in (None, False)]
    if given:
        raise InputError(f"{given[0]} applies to plain files (--qrels or --per-query)",
                         fix="inside an experiment the statistics settings come from params "
                             "(seed and the metrics section)")
    if len(names) != 2:
        raise InputError("compare two arms of the experiment, or give --qrels QRELS with "
                         "two or more run files, or --per-query FILE",
                         found=f"{len(names)} argument(s)")
    if len(measure_names) > 1:
        raise InputError("-m takes one measure inside an experiment",
                         found=", ".join(measure_names))
    _compare_arms(names[0], names[1], measure_names[0] if measure_names else None, fmt,
                  params_path, workers)


def _compare_arms(arm_a, arm_b, measure, fmt, params_path, workers):
    from relgrade.evaluation import compare as cmp
    from relgrade.evaluation.settings import design_pairs
    from relgrade.experiment.files import Experiment

    ex = Experiment.load(params_path)
    kwargs = ex.compare_inputs(full=False)
    settings = kwargs["settings"]
    arms = sorted(kwargs["per_query"]["arm"].unique())
    for arm in (arm_a, arm_b):
        if arm not in arms:
            raise InputError("unknown arm", item=arm, fix="Arms: " + ", ".join(arms))
    if arm_a == arm_b:
        raise InputError("compare two different arms", item=arm_a)
    design = design_pairs(arms, baseline=settings.baseline, mode=settings.pairs)
    if (arm_a, arm_b) not in design and (arm_b, arm_a) not in design:
        design.append((arm_a, arm_b))
    result = cmp.full_report(**kwargs, pairs=design, workers=workers)
    view = result.subset(pair=(arm_a, arm_b), measure=measure)
    model_only = ex.params.grading.mode == "ppi"
    if model_only:  # these are the model key's numbers: say so first
        label = ("ppi mode: the numbers below are the model key's alone (model-only), not a "
                 "decision; the decision is PPI++'s (relgrade metrics show, "
                 "metrics/comparisons.json, the report's verdicts)")
        # a text or markdown reader may pipe stdout alone: the label goes with the numbers;
        # JSON and LaTeX stay parseable, their label on stderr
        click.echo(label, err=fmt in ("json", "latex"))
    _print(view, fmt, measure=measure, pair=(arm_a, arm_b), model_only=model_only)


def _compare_files(names, qrels_path, per_query_paths, measure_names, fmt, workers, plain):
    from relgrade.evaluation import compare as cmp
    from relgrade.evaluation.settings import Settings, design_pairs
    from relgrade.io import files as io

    if qrels_path is not None and per_query_paths:
        raise InputError("give --qrels with run files, or --per-query, not both")
    if qrels_path is not None:
        if len(names) < 2:
            raise InputError("--qrels needs two or more run files to compare",
                             found=f"{len(names)} run file(s)")
        measures = list(measure_names or DEFAULT_MEASURES)
        per_query, record, notes = _score_runs(qrels_path, [Path(n) for n in names], measures,
                                               ties=plain["ties"] or "score",
                                               relevant_min=plain["relevant_min"] or 1)
    else:
        if plain["ties"] is not None or plain["relevant_min"] is not None:
            raise InputError("--ties and --relevant-min apply to scoring runs (--qrels); "
                             "per-query values are already scored")
        per_query, record = _read_per_query(per_query_paths)
        notes = []
        measures = list(measure_names) or None
        if names:
            known = sorted(per_query["arm"].unique())
            missing = [n for n in names if n not in known]
            if missing:
                raise InputError("run not in the per-query table", item=missing[0],
                                 fix="runs: " + ", ".join(known))
            per_query = per_query[per_query["arm"].isin(list(names))]
    runs = list(dict.fromkeys(per_query["arm"]))   # in the order given
    if len(runs) < 2:
        raise InputError("compare needs two or more runs", found=", ".join(runs) or "none")
    if plain["groups_path"] is not None:
        groups = io.read_table(plain["groups_path"], columns=["query_id", "group"])
        per_query = _with_groups(per_query, groups, plain["groups_path"])
    baseline = plain["baseline"] if plain["baseline"] is not None else runs[0]
    if baseline not in runs:
        raise InputError("--baseline is not one of the runs", item=baseline,
                         fix="runs: " + ", ".join(runs))
    settings = Settings(
        seed=plain["seed"] if plain["seed"] is not None else 0,
        n_resamples=plain["bootstrap"] or 10_000, n_permutations=plain["permutations"] or 10_000,
        level=plain["level"] or 0.95, method=plain["interval"] or "auto",
        test=plain["verdict_test"] or "mean",
        alpha=plain["alpha"] or 0.05, power=plain["power"] or 0.8,
        min_relative_change=plain["min_relative_change"] or 0.02, baseline=baseline,
        pairs="all" if plain["all_pairs"] else "baseline")
    pairs = design_pairs(runs, baseline=baseline, mode=settings.pairs)
    result = cmp.compare_arms(per_query, settings=settings, pairs=pairs, measures=measures,
                              workers=workers)
    result.record = record
    _print(result, fmt)
    if fmt is None:
        for note in notes:
            click.echo(note)


def _run_names(paths: list[Path]) -> list[str]:
    # a run is named by its file name without extension; two alike are named by their path
    stems = [p.stem for p in paths]
    return [p.as_posix() if stems.count(p.stem) > 1 else p.stem for p in paths]


def _score_runs(qrels_path: Path, run_paths: list[Path], measure_names: list[str], *,
                ties: str, relevant_min: int):
    """Per-query values of every run (columns arm, query_id, measure, value), the record of
    the inputs, and notes about queries left out or not answered."""
    import pandas as pd

    from relgrade.evaluation import metrics
    from relgrade.evaluation.measures import parse_measure
    from relgrade.io.files import sha256_file
    from relgrade.io.judgments import read_judgments
    from relgrade.io.runs import read_run, run_lines
    from relgrade.ranking import validate_run

    measures = [parse_measure(m, relevant_min=relevant_min) for m in measure_names]
    judged = [m for m in measures if str(m).startswith("Judged")]
    if judged:
        raise InputError("Judged@k describes the pool, not the ranking, and is not compared",
                         item=str(judged[0]), fix="use relgrade evaluate for it")
    qrels = read_judgments(qrels_path)[["query_id", "chunk_id", "grade"]]
    key = metrics.index_qrels(qrels)
    known = set(key.query_ids.to_pylist())
    tables, notes = [], []
    record = {"qrels": qrels_path.as_posix(), "qrels_sha256": sha256_file(qrels_path),
              "runs": {}}
    names = _run_names(run_paths)
    if len(set(names)) < len(names):
        raise InputError("a run file is given twice", item=next(
            n for n in names if names.count(n) > 1))
    for name, path in zip(names, run_paths):
        run = read_run(path)
        validate_run(run, path=path, lines=run_lines(path),
                     empty_fix="Give the run at least one ranked chunk, or leave the file "
                               "out of `relgrade compare --qrels`")
        pq = metrics.per_query(qrels=key, run=run, measures=measures, on_missing_query="zero",
                               ties=ties)
        tables.append(pq.assign(arm=name))
        record["runs"][name] = {"path": path.as_posix(), "sha256": sha256_file(path)}
        asked = set(run["query_id"].astype(str).unique())
        if len(known - asked):
            notes.append(f"Note: run {name} answers {len(known & asked)} of {len(known)} "
                         f"queries of the qrels; the other {len(known - asked)} score 0.")
        if asked - known:
            extra = sorted(asked - known)
            shown = ", ".join(extra[:10]) + (", ..." if len(extra) > 10 else "")
            notes.append(f"Note: run {name} has {len(extra)} queries that are not in the "
                         f"qrels, left out: {shown}.")
    excluded = metrics.excluded_queries(qrels, measures, relevant_min=relevant_min)
    for m, queries in excluded.items():
        if queries:
            notes.append(f"Note: {len(queries)} of {len(known)} queries excluded from {m}: "
                         "nothing relevant in the qrels.")
    return pd.concat(tables, ignore_index=True), record, notes


def _read_per_query(paths):
    """The stacked per-query table of the --per-query files, and their record."""
    import numpy as np
    import pandas as pd

    from relgrade.io.files import read_rows, sha256_file

    tables, record = [], {"per_query": {}}
    for path in paths:
        table, lines = read_rows(path, ["query_id", "measure", "value"])
        if len(table) == 0:
            raise InputError("per-query table is empty", path=path)
        run_col = next((c for c in ("run", "arm") if c in table.columns), None)
        out = pd.DataFrame({
            "arm": table[run_col].astype(str) if run_col else path.stem,
            "query_id": table["query_id"].astype(str), "measure": table["measure"].astype(str),
            "value": pd.to_numeric(table["value"], errors="coerce").astype(np.float64)})
        if "group" in table.columns:
            out["group"] = table["group"].astype(str)
        bad = ~np.isfinite(out["value"].to_numpy())
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError("per-query value must be a finite number", path=path,
                             line=None if lines is None else lines[i],
                             item=f"run {out['arm'].iloc[i]}, query {out['query_id'].iloc[i]}, "
                                  f"measure {out['measure'].iloc[i]}",
                             found=repr(table["value"].iloc[i]))
        dup = out.duplicated(["arm", "query_id", "measure"])
        if dup.any():
            i = int(np.flatnonzero(dup.to_numpy())[0])
            raise InputError("a query has two values for one run and measure", path=path,
                             line=None if lines is None else lines[i],
                             item=f"run {out['arm'].iloc[i]}, query {out['query_id'].iloc[i]}, "
                                  f"measure {out['measure'].iloc[i]}")
        tables.append(out)
        record["per_query"][path.as_posix()] = sha256_file(path)
    stacked = pd.concat(tables, ignore_index=True)
    if "group" in stacked.columns and stacked["group"].isna().any():
        raise InputError("some --per-query files have a group column and others not",
                         fix="give the groups once with --groups FILE")
    dup = stacked.duplicated(["arm", "query_id", "measure"])
    if dup.any():
        r = stacked[dup].iloc[0]
        raise InputError("two --per-query files hold the same run",
                         item=f"run {r['arm']}, query {r['query_id']}, measure {r['measure']}")
    return stacked, record


def _with_groups(per_query, groups, path):
    g = groups.assign(query_id=groups["query_id"].astype(str), group=groups["group"].astype(str))
    dup = g["query_id"].duplicated()
    if dup.any():
        raise InputError("a query is listed twice in the group table", path=path,
                         item=f"query {g.loc[dup, 'query_id'].iloc[0]}")
    mapping = dict(zip(g["query_id"], g["group"]))
    missing = sorted(set(per_query["query_id"]) - set(mapping))
    if missing:
        raise InputError("a query has no group", path=path, item=f"query {missing[0]}",
                         fix="list every compared query in the group table")
    return per_query.assign(group=per_query["query_id"].map(mapping))


def _print(result, fmt, *, measure=None, pair=None, model_only=False):
    if fmt == "json":
        click.echo(result.to_json(), nl=False)
        return
    if fmt == "markdown":
        click.echo(result.to_markdown(), nl=False)
        return
    if fmt == "latex":
        click.echo(result.to_latex(), nl=False)
        return
    import sys

    from relgrade.terminal import console as inert_console

    # a pipe or file gets wide lines rather than wrapped cells
    console = inert_console(width=None if sys.stdout.isatty() else 160)
    for table in result.rich_tables(measure=measure, pair=pair):
        console.print(table)
    for line in result.verdicts():
        # in ppi mode a verdict line copied alone must still say whose numbers it holds
        click.echo(f"model-only, not a decision: {line}" if model_only else line)
