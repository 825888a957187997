"""``relgrade compare ARM_A ARM_B``: is one arm better than another, and how sure is that?

Also home of :func:`load_experiment`, which reads what a comparison needs from the
experiment's files; the ``compare`` stage uses it too, so both read the same inputs the
same way.
"""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from relgrade.cli.render import handle_errors
from relgrade.errors import InputError, ProtocolError
from relgrade.evaluation import compare as cmp
from relgrade.experiment.stage import load_params, path_of
from relgrade.io import files as io
from relgrade.io.runs import read_run


def _read_key(params: dict, base: Path) -> tuple[pd.DataFrame, dict]:
    key_path, record_path = base / path_of(params, "key"), base / path_of(params, "record")
    record = io.read_json(record_path)
    digest = io.sha256_file(key_path)
    if digest != record.get("key_sha256"):
        raise ProtocolError(f"{key_path}: the key's sha256 {digest[:12]}… differs from the "
                            f"record's {str(record.get('key_sha256'))[:12]}…; the key changed "
                            "after it was frozen. Rerun the key stage (dvc repro key)")
    key = io.read_table(key_path, columns=["query_id", "chunk_id", "grade"])
    return key, {"key_sha256": record.get("key_sha256"),
                 "pool_version": record.get("pool_version"),
                 "post_hoc": bool(record.get("post_hoc", False))}


def load_experiment(params: dict, *, base: Path = Path("."), full: bool = True) -> dict:
    """Everything :func:`relgrade.evaluation.compare.full_report` needs, read from the experiment's files.

    Parameters
    ----------
    params : dict
        The experiment's params.
    base : pathlib.Path, default "."
        Folder the params' paths are relative to.
    full : bool, default True
        True (the stage): every input must exist. False (the CLI): only the per-query files
        are required; the key, runs, grades and audit are used when present, the pool-bias
        inputs never.

    Returns
    -------
    dict
        Keyword arguments for :func:`relgrade.evaluation.compare.full_report`.

    Raises
    ------
    InputError
        A required file is missing or malformed, or a params entry is missing.
    ProtocolError
        The key's hash differs from its record.
    """
    settings = cmp.Settings.from_params(params)
    arms = sorted(map(str, params.get("arms") or {}))
    pq_dir = base / path_of(params, "per_query")
    tables = []
    for arm in arms:
        path = pq_dir / f"{arm}.parquet"
        if not path.exists():
            raise InputError("per-query values missing", path=path, item=f"arm {arm}",
                             fix="Run the metrics stage first (dvc repro metrics)")
        t = io.read_table(path, columns=["query_id", "measure", "value"])
        tables.append(t.assign(arm=arm))
    if not tables:
        raise InputError("params lists no arms", path="params.yaml")
    metrics_cfg = params.get("metrics") or {}
    scale, grading = params.get("scale") or {}, params.get("grading") or {}
    kwargs = {"per_query": pd.concat(tables, ignore_index=True), "settings": settings,
              "ties": str((params.get("runs") or {}).get("ties", "score")),
              "relevant_min": int(scale.get("relevant_min", 1)),
              "cutoffs": list(metrics_cfg.get("cutoffs", [])),
              "round": int(grading.get("round", 1)),
              "auditor": grading.get("auditor")}
    if metrics_cfg.get("weighted"):
        q = io.read_table(base / path_of(params, "queries"), columns=["query_id", "weight"])
        kwargs["weights"] = dict(zip(q["query_id"].astype(str), q["weight"].astype(float)))
    have = (lambda name: True) if full else (lambda name: (base / path_of(params, name)).exists())
    if have("key") and have("record"):
        kwargs["qrels"], kwargs["record"] = _read_key(params, base)
        run_dir = base / path_of(params, "runs")
        if full or all((run_dir / f"{a}.trec").exists() for a in arms):
            kwargs["runs"] = pd.concat([read_run(run_dir / f"{a}.trec").assign(arm=a)
                                        for a in arms], ignore_index=True)
    if have("grades") and have("audit"):
        kwargs["grades"] = io.read_table(
            base / path_of(params, "grades"),
            columns=["query_id", "chunk_id", "grader", "round", "grade"])
        kwargs["audit_queries"] = [str(r["query_id"])
                                   for r in io.read_jsonl(base / path_of(params, "audit"))]
    if full:
        kwargs["provenance"] = io.read_table(base / path_of(params, "provenance"))
        kwargs["depth"] = int((params.get("pool") or {})["depth"])
    return kwargs


@click.command("compare")
@click.argument("arm_a")
@click.argument("arm_b")
@click.option("--measure", "-m", default=None,
              help="Only this measure, e.g. \"nDCG(dcg='exp-log2')@10\" (default: every "
                   "measure except Judged@k).")
@click.option("--json", "fmt", flag_value="json", help="Print the comparison as JSON.")
@click.option("--markdown", "fmt", flag_value="markdown", help="Print a Markdown report.")
@click.option("--params", "params_path", default="params.yaml", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The experiment's params.")
@click.option("--workers", type=int, default=None,
              help="Threads to use (default: chosen by the amount of work). Never changes "
                   "a number.")
@handle_errors
def compare_cmd(arm_a, arm_b, measure, fmt, params_path, workers):
    """Compare ARM_A against ARM_B over the queries of the frozen key.

    Reads the per-query values the metrics stage wrote and prints each arm's mean with its
    bootstrap confidence interval, then the paired difference ARM_A - ARM_B with its
    interval, the sign-flip randomization p-value, the p-value after Holm's correction, the
    paired t test, Cohen's d_z, per-group differences, and a one-line verdict per measure.
    Holm runs over the same family as the compare stage (params metrics.pairs, every
    measure), plus this pair if the design does not already hold it, so the numbers equal
    those in metrics/comparisons.json. With the key, runs, grades and audit present, the
    verdict also weighs the label-noise band.
    """
    params = load_params(params_path)
    kwargs = load_experiment(params, base=params_path.parent, full=False)
    settings = kwargs["settings"]
    arms = sorted(kwargs["per_query"]["arm"].unique())
    for arm in (arm_a, arm_b):
        if arm not in arms:
            raise InputError("unknown arm", item=arm, fix="Arms: " + ", ".join(arms))
    if arm_a == arm_b:
        raise InputError("compare two different arms", item=arm_a)
    design = cmp.design_pairs(arms, baseline=settings.baseline, mode=settings.pairs)
    if (arm_a, arm_b) not in design and (arm_b, arm_a) not in design:
        design.append((arm_a, arm_b))
    result = cmp.full_report(**kwargs, pairs=design, workers=workers)
    view = result.subset(pair=(arm_a, arm_b), measure=measure)
    if fmt == "json":
        click.echo(view.to_json(), nl=False)
        return
    if fmt == "markdown":
        click.echo(view.to_markdown(), nl=False)
        return
    import sys

    from rich.console import Console

    # a pipe or file gets wide lines rather than wrapped cells
    console = Console(width=None if sys.stdout.isatty() else 160)
    for table in view.rich_tables(measure=measure, pair=(arm_a, arm_b)):
        console.print(table)
    for line in view.verdicts():
        click.echo(line)
