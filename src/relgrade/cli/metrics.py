"""``relgrade metrics``: one experiment's decision per arm (show), its plots (plots), and the
decision at two revisions (diff)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import click

from relgrade.cli.options import format_option, params_option
from relgrade.cli.render import handle_errors, number, table


@click.group("metrics")
def metrics_cmd():
    """The experiment's decision metrics (metrics/decision/ARM.json)."""


def _f(x) -> str:
    return "—" if x is None else f"{x:.4f}"


def _post_hoc_key(ex) -> dict | None:
    """The post-hoc key standing beside the frozen one in the workspace, or None:
    ``{"sha256", "frozen_at", "corrections", "metrics"}`` from its record (as ``status``
    shows it; ``metrics`` the post-hoc metrics folder)."""
    if not getattr(ex.params.paths, "key_post_hoc", None):
        return None
    if not ex.key_files(post_hoc=True).record.exists():
        return None
    record = ex.read_key(post_hoc=True)[1]
    metrics = (ex.path("metrics_post_hoc").as_posix()
               if getattr(ex.params.paths, "metrics_post_hoc", None) else None)
    return {"sha256": record.get("key_sha256"), "frozen_at": record.get("frozen_at"),
            "corrections": len(record.get("corrections") or []), "metrics": metrics}


def _post_hoc_line(ph: dict) -> str:
    folder = ph["metrics"] or "post-hoc metrics folder"
    return (f"post-hoc: a post-hoc key {ph['sha256']} ({ph['corrections']} correction"
            f"{'s' if ph['corrections'] != 1 else ''}, frozen at {ph['frozen_at']}) stands "
            "beside the frozen key; the numbers here are the frozen key's, the post-hoc ones "
            f"are in the report's post-hoc section and {folder}")


def _dvc(argv: list[str], *, cwd=None) -> str:
    """Run one of DVC's commands and return what it printed; an :class:`InputError` naming the
    command and DVC's last line when DVC is missing or exits non-zero."""
    import subprocess

    from relgrade.errors import InputError

    try:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              cwd=cwd)
    except FileNotFoundError:
        raise InputError("dvc is not installed here", item="dvc",
                         fix="Install relgrade's dependencies (pip install -e .)") from None
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise InputError(f"`{' '.join(argv[:3])}` failed", item=shlex.join(argv),
                         found=said[-1] if said else f"exit status {proc.returncode}")
    return proc.stdout


@metrics_cmd.command("diff")
@click.argument("a_rev", default="HEAD")
@click.argument("b_rev", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@params_option
@handle_errors
def diff_cmd(a_rev, b_rev, as_json, params_path):
    """Compare each arm's decision at git revision A_REV (default HEAD) with B_REV (default:
    the files on disk), as `dvc metrics diff` does, and say first whether the numbers are
    comparable: two keys of different pool versions are not ("not comparable: pool p-… vs
    p-…"), nor is a side with no decision files (the experiment's folder not committed yet,
    or its metrics stage not run at that revision). The report's translation section scores
    every arm under both keys instead. When a post-hoc key stands beside the frozen one in
    the workspace, a last line says so (JSON: post_hoc_key)."""
    from relgrade.evaluation.translate import KEY_MEAN, diff_decisions
    from relgrade.pipeline.decisions import read_decisions
    from relgrade.experiment.files import Experiment

    ex = Experiment.load(params_path)
    b_name = b_rev or "workspace"
    sides = (read_decisions(ex, a_rev), read_decisions(ex, b_rev))
    diff = diff_decisions(*sides, sides=(a_rev, b_name))
    post_hoc = _post_hoc_key(ex)
    if as_json:
        click.echo(json.dumps({**diff, "post_hoc_key": post_hoc}, indent=2))
        return
    click.echo(diff["reason"] or f"comparable: pool {diff['pools'][1]} on both sides")
    said = [f"pool {pool} (key {key}) at {name}" if files else
            f"no decision files at {name} ({ex.path('decision').as_posix()})"
            for files, pool, key, name in zip(sides, diff["pools"], diff["keys"],
                                              (a_rev, b_name))]
    click.echo("; ".join(said))
    if any(e != KEY_MEAN for e in diff["estimators"]):  # ppi mode on either side
        click.echo(f"estimator: {diff['estimators'][0]} at {a_rev}, {diff['estimators'][1]} "
                   f"at {b_name}")
    for r in diff["arms"]:
        change = "—" if r["change"] is None else f"{r['change']:+.4f}"
        click.echo(f"  {r['arm']}: {r['measure']} {_f(r['old'])} at {a_rev} -> "
                   f"{_f(r['new'])} at {b_name} ({change})")
    if post_hoc is not None:
        click.echo(_post_hoc_line(post_hoc) + " (in the workspace)")


@metrics_cmd.command("show")
@format_option(json_help="Print the rows as JSON, with the experiment's name.")
@params_option
@handle_errors
def show_cmd(as_json, params_path):
    """Print one experiment's decision per arm (metrics/decision/ARM.json): measure, mean,
    interval, Judged@k, and the difference from the baseline with its Holm-adjusted p-value
    (a field an arm's file lacks prints as `missing`; one it holds without a value, as
    `undefined`). A file of no arm of params is left out with a note, and an arm without a
    file is named (JSON: not_arms, arms_without_file).
    In ppi mode these are PPI++'s, and a line says so; with the anytime stopping rule the
    differences are the rule's, and a second line says so.
    `dvc metrics show` lists every experiment of the repository; this lists one, then prints
    DVC's own commands limited to it (metrics, plots, experiments table). When a post-hoc key
    stands beside the frozen one, a line says so: the rows are the frozen key's (JSON:
    post_hoc_key, else null). When a decision stage stopped after its input was made again
    (the ppi stage refusing changed grades), a `stale:` line names it: the rows are of the
    earlier input (JSON: stale, stage -> [[path, the stage that made it again]])."""
    from relgrade.errors import InputError
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.decisions import read_decisions
    from relgrade.pipeline.since_repro import behind_lines, stages_behind
    from relgrade.pipeline.views import decision_rows, dvc_commands, experiment_name

    ex = Experiment.load(params_path)
    decisions = read_decisions(ex)
    stray, absent = [], []
    if ex.params.arms:  # the arms of params, and those that joined a frozen key
        arms = set(ex.params.arms) | set(ex.params.holes.arms if ex.params.holes else ())
        stray = sorted(set(decisions) - arms)
        absent = sorted(arms - set(decisions)) if decisions else []
        decisions = {a: d for a, d in decisions.items() if a in arms}
    rows = decision_rows(decisions)
    if not rows:
        raise InputError("no decision files yet", path=ex.path("decision"),
                         fix="Run `dvc repro` until the metrics stage has run")
    name = experiment_name(ex)
    post_hoc = _post_hoc_key(ex)
    # a decision stage that stopped after its input was remade: these files are of the old one
    behind = stages_behind(ex)
    if as_json:
        click.echo(json.dumps({"experiment": name, "arms": rows, "post_hoc_key": post_hoc,
                               "not_arms": stray, "arms_without_file": absent,
                               "stale": behind.get("stages", {})}, indent=2))
        return
    key = next((d["key"] for d in decisions.values() if d.get("key")), None)
    baseline = next((r["baseline"] for r in rows if r["baseline"]), rows[0]["arm"])
    click.echo(f"{name}: key {key or 'undefined'}, {len(rows)} arms, baseline {baseline}")
    estimators = sorted({str(d["estimator"]) for d in decisions.values() if d.get("estimator")})
    if estimators:  # ppi mode: say which estimator the numbers are, and what stands beside
        human = next((d.get("human_queries") for d in decisions.values()
                      if d.get("human_queries") is not None), None)
        click.echo(f"estimator: {', '.join(estimators)} (people on {human} queries, the model "
                   "on every query); model_only_* and human_only_* beside it in the files")
        by = sorted({str(d["delta_estimator"]) for d in decisions.values()
                     if d.get("delta_estimator")})
        if by:  # the differences were made by another estimator (the stopping rule's)
            click.echo(f"delta and p_holm: {', '.join(by)} (the stopping rule's confidence "
                       "sequence on people's grades in the seeded order, Holm over anytime "
                       "p-values; delta_estimator in the files)")
    def cell(r, name):  # a field the arm's file lacks is missing; one it holds as null, undefined
        return number(r[name]) if name in decisions[r["arm"]] else "missing"

    cells = [[r["arm"], str(r["measure"]), cell(r, "mean"),
              f"[{cell(r, 'low')}, {cell(r, 'high')}]", cell(r, "judged"),
              "" if r["delta"] is None else f"{r['delta']:+.4f}",
              "" if r["p_holm"] is None else number(r["p_holm"])] for r in rows]
    for line in table(["arm", "measure", "mean", "interval", "judged", "delta", "p_holm"],
                      cells, right={2, 4, 5, 6}):
        click.echo(line)
    if post_hoc is not None:
        click.echo(_post_hoc_line(post_hoc))
    for line in behind_lines(behind):
        click.echo(line.replace("its files below are", "these files are"))
    folder = ex.path("decision")
    for arm in stray:  # as the publish stage leaves such a file out of the bundle
        click.echo(f"note: {folder / (arm + '.json')} is the file of no arm of params; "
                   "not shown")
    if absent:
        click.echo(f"note: no decision file for {', '.join(absent)} yet; run `dvc repro` "
                   "until the report stage has run")
    click.echo(f"DVC's views of {name} alone:")
    for argv in dvc_commands(ex).values():
        click.echo("  " + shlex.join(argv))


@metrics_cmd.command("exp")
@format_option(json_help="Print the revisions as JSON, with the experiment's name.")
@params_option
@handle_errors
def exp_cmd(as_json, params_path):
    """DVC's experiments table (`dvc exp show`) for this experiment's decision alone, in the
    terminal's width (80 columns when not a terminal): one row per revision (the workspace,
    each commit, each `dvc exp run` experiment), one column per arm reading MEAN DELTA pP
    (mean of the primary measure, difference from the baseline, Holm-adjusted p-value),
    the arms in blocks that fit; a difference the anytime stopping rule made is marked *
    and a last line names the revisions. `dvc exp show` itself names a column by the file's path
    from the repository's top and cannot fit an experiment with two arms in 80 columns."""
    import shutil

    from relgrade.errors import InputError
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import find_repository
    from relgrade.pipeline.views import exp_notes, exp_rows, exp_table, exp_title, experiment_name

    ex = Experiment.load(params_path)
    repo = find_repository(ex.root)
    prefix = Path(os.path.relpath(ex.path("decision").resolve(), repo.resolve())).as_posix()
    argv = ["dvc", "exp", "show", "--json"]
    printed = _dvc(argv, cwd=repo)
    try:
        entries = json.loads(printed or "[]")
    except json.JSONDecodeError as err:
        raise InputError("`dvc exp show --json` printed no JSON", item=shlex.join(argv),
                         found=str(err)) from None
    rows = exp_rows(entries if isinstance(entries, list) else [], prefix)
    name = experiment_name(ex)
    if as_json:
        click.echo(json.dumps({"experiment": name, "decision": prefix, "revisions": rows},
                              indent=2))
        return
    if not any(r["arms"] for r in rows):
        raise InputError("no revision has decision files", path=ex.path("decision"),
                         fix="Run `dvc repro` until the metrics stage has run")
    width = max(40, shutil.get_terminal_size((80, 24)).columns)
    for line in exp_title(name, len(rows), width=width):
        click.echo(line)
    for line in exp_table(rows, width=width) + exp_notes(rows):
        click.echo(line)


@metrics_cmd.command("plots")
@click.option("--out", "out", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="The folder DVC writes index.html to (default: dvc_plots).")
@params_option
@handle_errors
def plots_cmd(out, params_path):
    """Draw one experiment's plots with `dvc plots show` limited to its dvc.yaml (the
    per-arm intervals, the per-query differences, and its stages' plots), each titled with the
    experiment's name, instead of every experiment of the repository."""
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.views import dvc_commands

    ex = Experiment.load(params_path)
    argv = dvc_commands(ex)["plots"] + (["-o", str(out)] if out is not None else [])
    click.echo(_dvc(argv).strip())
