"""``relgrade init``: a new experiment in its own folder, ready for ``dvc repro``."""

from __future__ import annotations

from pathlib import Path

import click

from relgrade.cli.render import handle_errors

_PATH = click.Path(dir_okay=False, path_type=Path)


def _larger_sample_at_init(n_queries: int, where: str) -> str:
    """How to follow the recommended human-sample size at ``relgrade init`` (a sentence, no
    final stop): init's options, or the params key before the audit stage draws the sample.

    Examples
    --------
    >>> _larger_sample_at_init(15, "experiments/x")
    'Run relgrade init again with --force and --human-queries 10 (or --human-fraction 0.67), or set ppi.human_queries: 10 (and ppi.human_fraction: null) in experiments/x/params.yaml before the first dvc repro draws the sample'
    >>> _larger_sample_at_init(6, "experiments/x")
    'The experiment has 6 queries, fewer than 10: add queries (--queries) and run relgrade init again with --force, or sample all of them (--human-queries 6)'
    """
    from relgrade.evaluation.ppi_table import RECOMMENDED_SAMPLE as r

    if n_queries < r:
        return (f"The experiment has {n_queries} queries, fewer than {r}: add queries "
                f"(--queries) and run relgrade init again with --force, or sample all of them "
                f"(--human-queries {n_queries})")
    return (f"Run relgrade init again with --force and --human-queries {r} (or --human-fraction "
            f"{r / n_queries:.2g}), or set ppi.human_queries: {r} (and ppi.human_fraction: "
            f"null) in {where}/params.yaml before the first dvc repro draws the sample")


@click.command("init")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--corpus", default=None, type=_PATH,
              help="A source spec (.yaml, like data/input/corpus.source.yaml), a chunks file "
                   "(.jsonl/.parquet: chunk_id, header, text, source) or a BEIR corpus.jsonl "
                   "(_id, title, text).")
@click.option("--queries", default=None, type=_PATH,
              help="A TSV or JSONL (query_id, query, group) or a BEIR queries.jsonl (_id, text).")
@click.option("--intents", default=None, type=_PATH,
              help="The intent table: a TSV or JSONL (query_id, query, intent), one per query.")
@click.option("--query-log", default=None, type=_PATH,
              help="Instead of --queries and --intents: a query log (TSV/Parquet/JSONL with "
                   "query and count, or one query per line); a sample stage draws the query "
                   "set from it, and the intents are written for the sampled queries.")
@click.option("--sample-n", type=click.IntRange(min=1), default=None,
              help="With --query-log: how many distinct queries the sample stage draws.")
@click.option("--allocation", type=click.Choice(["equal", "proportional"]), default="equal",
              show_default=True,
              help="With --query-log: how the sample is split over head, torso and tail.")
@click.option("--arm", "arms", multiple=True, metavar="NAME=KIND",
              help="A built-in arm: bm25, bm25f, tfidf, embed, rrf (fuses every other arm) or "
                   "rrf:A,B (fuses arms A and B, external runs included). Repeatable.")
@click.option("--run", "runs", multiple=True, metavar="NAME=FILE",
              help="An external run (TREC, JSONL or Parquet) as an arm. Repeatable.")
@click.option("--baseline", default=None, help="The arm others are compared with "
                                               "(default: the first arm).")
@click.option("--pool-depth", type=click.IntRange(min=1), default=10, show_default=True,
              help="Chunks pooled per arm and query.")
@click.option("--audit-min", type=click.IntRange(min=1), default=10, show_default=True,
              help="The least number of queries the auditor grades.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="The experiment's seed (params `seed`).")
@click.option("--grader", "key_grader", default="grader-a", show_default=True,
              help="The key grader's name.")
@click.option("--auditor", default="auditor-b", show_default=True, help="The auditor's name.")
@click.option("--grader-command", default=None,
              help="Make the key grader a command grader running this command "
                   "(default: a person grading on the web page).")
@click.option("--auditor-command", default=None,
              help="Make the auditor a command grader running this command.")
@click.option("--share-from", "share_from", multiple=True, metavar="FOLDER",
              help="Reuse another experiment's current grades (repeatable): its folder, "
                   "relative to the new one (e.g. ../other); written to grading.share_from "
                   "and as a dvc dep of the packets and grades stages.")
@click.option("--mode", type=click.Choice(["single", "triage", "raters", "ppi", "clicks"]),
              default="single", show_default=True,
              help="single: one key grader and an auditor; triage: a model grader (--triage) "
                   "screens every pair and people grade what it marks relevant plus a sample "
                   "of its 0s; raters: a panel (--rater, at least 4) with gold questions "
                   "(--gold), aggregation and an expert (--expert); ppi: the key grader "
                   "(--grader-command) is a model grading every pair, the auditor grades a "
                   "seeded uniform sample of queries (--human-fraction) for prediction-"
                   "powered estimates; clicks: a click experiment over --click-log "
                   "(propensities, pairs; IPS with --rankings, a training set with "
                   "--click-key).")
@click.option("--human-fraction", type=float, default=None,
              help="With --mode ppi: the share of the queries people grade in full, in (0, 1] "
                   "(default 0.2); it must give from 3 queries to all of them.")
@click.option("--human-queries", type=int, default=None,
              help="With --mode ppi: instead of --human-fraction, how many queries people "
                   "grade in full (3 to the number of queries; 10 or more for honest "
                   "intervals).")
@click.option("--triage", "triage", default="model-t", show_default=True, metavar="NAME[=COMMAND]",
              help="With --mode triage: the triage model grader, and its command.")
@click.option("--rater", "raters", multiple=True, metavar="NAME[=COMMAND]",
              help="With --mode raters: a rater, a command grader when COMMAND is given, else a "
                   "person on the web page. Repeatable, at least 4 (3 grade each pair).")
@click.option("--expert", default="expert-e", show_default=True, metavar="NAME[=COMMAND]",
              help="With --mode raters: the expert who adjudicates flagged pairs.")
@click.option("--gold", default=None, type=_PATH,
              help="With --mode raters: the gold pairs (TSV: query_id, chunk_id, grade), "
                   "hidden in every rater's queue.")
@click.option("--gold-fraction", type=float, default=0.1, show_default=True,
              help="With --mode raters: the share of the pool drawn from the gold file as "
                   "gold questions (params gold.fraction), in (0, 0.5]; the gold file needs "
                   "at least that many pool pairs.")
@click.option("--click-log", default=None, type=_PATH,
              help="With --mode clicks: the click log (see docs/clicks.md for its columns).")
@click.option("--rankings", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="With --mode clicks: a folder of TREC runs, one per ranking shown, for IPS "
                   "estimates.")
@click.option("--click-key", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="With --mode clicks: a frozen key's folder (e.g. data/key) for the "
                   "training set; its queries are left out of the click rows.")
@click.option("--click-method", type=click.Choice(["randomization", "harvesting"]),
              default="randomization", show_default=True,
              help="With --mode clicks: how position propensities are estimated.")
@click.option("--allow-empty", is_flag=True,
              help="Keep chunks whose text is empty or blank (params corpus.allow_empty: "
                   "true; they are counted in the corpus manifest). Without it such a chunk "
                   "is refused.")
@click.option("--force", is_flag=True, help="Replace a folder that is not empty.")
@handle_errors
def init_cmd(folder, corpus, queries, intents, query_log, sample_n, allocation, arms, runs,
             baseline, pool_depth, audit_min, seed, key_grader, auditor, grader_command,
             auditor_command, share_from, mode, human_fraction, human_queries, triage, raters,
             expert, gold, gold_fraction, click_log, rankings, click_key, click_method,
             allow_empty, force):
    """Create an experiment in FOLDER (e.g. experiments/NAME): params.yaml, a dvc.yaml running
    the repository's stages there, a generic rubric, the inputs under data/input/, and
    DESIGN.md. FOLDER's last segment is the experiment's name: letters, digits, '.', '_', '-'.
    Refuses a folder that is not empty (unless --force) and leaves nothing behind on error."""
    from relgrade.pipeline.scaffold import (
        Plan,
        init_click_experiment,
        init_experiment,
        parse_pairs,
        parse_person,
    )

    if mode == "clicks":
        ex = init_click_experiment(Plan(
            folder=folder, corpus=None, queries=None, intents=None, seed=seed, force=force,
            mode=mode, click_log=click_log, rankings=rankings, click_key=click_key,
            click_method=click_method))
        where = folder.as_posix()
        parts = ["propensity", "pairs", *(["ips"] if rankings else []),
                 *(["training_set"] if click_key else [])]
        click.echo(f"Created click experiment {ex.root.name} in {where}: stages "
                   f"{', '.join(parts)}.")
        click.echo(f"Next: dvc repro {where}/dvc.yaml; describe the log in {where}/DESIGN.md")
        return
    if corpus is None:
        raise click.UsageError("--corpus is required (except with --mode clicks)")
    plan = Plan(folder=folder, corpus=corpus, queries=queries, intents=intents,
                runs={k: Path(v) for k, v in parse_pairs(runs, option="--run").items()},
                arms=parse_pairs(arms, option="--arm"), baseline=baseline,
                pool_depth=pool_depth, audit_min=audit_min, seed=seed, key_grader=key_grader,
                auditor=auditor, grader_command=grader_command,
                auditor_command=auditor_command, force=force, query_log=query_log,
                sample_n=sample_n, allocation=allocation, share_from=list(share_from),
                mode=mode, human_fraction=human_fraction, human_queries=human_queries,
                triage=parse_person(triage, option="--triage"),
                raters=[parse_person(r, option="--rater") for r in raters],
                expert=parse_person(expert, option="--expert"), gold=gold,
                gold_fraction=gold_fraction, allow_empty=allow_empty)
    ex = init_experiment(plan)
    where = folder.as_posix()
    arms_made = ", ".join(f"{a} ({c['kind']})" for a, c in ex.params.arms_dict().items())
    click.echo(f"Created experiment {ex.root.name} in {where}: arms {arms_made}.")
    for line in ex.params.grading.deviations:
        click.echo(f"Note (recorded in params grading.deviations): {line}")
    if mode == "ppi":
        from relgrade.io.files import read_tsv
        from relgrade.evaluation.ppi_table import small_sample_words
        from relgrade.pipeline.scaffold import human_sample_size

        n = sample_n if query_log is not None else len(
            read_tsv(ex.root / ex.params.queries.input))
        size = human_sample_size(plan, n)
        click.echo(f"Human sample: {size} of {n} queries, drawn and "
                   "locked by the audit stage before any grade; once the model grader has "
                   "graded, a change of seed, ppi.human_fraction or ppi.human_queries is "
                   "refused (a new grading.round draws a new sample)")
        small = small_sample_words(size, fix=_larger_sample_at_init(n, where))
        if small is not None:
            click.echo(f"Warning: {small}")
    if ex.params.gold is not None:
        click.echo(f"Note: the gold file is private: {where}/{ex.params.gold.input} is kept "
                   f"out of git; track it with `dvc add {where}/{ex.params.gold.input}` and "
                   "commit the .dvc file")
    click.echo("Next:")
    if query_log is not None:
        click.echo(f"  0. dvc repro {where}/dvc.yaml:sample draws the queries into "
                   f"{where}/data/input/queries.sampled.tsv; write one intent per sampled "
                   f"query in {where}/data/input/intents.tsv (query_id, query, intent)")
    click.echo(f"  1. add corpus examples to {where}/rubric/v1.md (section 8) and fill in "
               f"{where}/DESIGN.md")
    click.echo(f"  2. relgrade intents review --experiment {where} --reviewer {plan.auditor}")
    click.echo(f"  3. dvc repro {where}/dvc.yaml (it stops at the grading owed, naming the "
               f"commands), grade (relgrade grade run or relgrade serve, with --experiment "
               f"{where}), then dvc repro {where}/dvc.yaml again")
