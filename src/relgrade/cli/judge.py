"""``relgrade judge status`` and ``relgrade judge record``: the calibration ledger.

``judge status`` prints, per model grader of the experiment, its judge identity now and
whether a calibration against people holds for it, then every measurement the ledger keeps
for the grader (any identity)::

    judge: model-m identity 3f0c2a9d11b7: no calibration recorded; owed: a re-check against people, relgrade judge record --grader model-m
      09c7abec50e0 measured 2026-12-02T05:52:10Z against person-h on 240 pairs (40 queries), rubric v1 cc2176e51775: weighted kappa 0.46 [0.31, 0.58], binary kappa 0.52 [0.38, 0.65], leniency +0.30 [0.21, 0.39]

``judge record`` measures a grader's grades under its identity now against people's and
appends the measurement to ``judges/ledger.jsonl`` (see docs/judges.md).
"""

from __future__ import annotations

import json

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("judge")
def judge_cmd():
    """Model judges' calibration against people, kept in judges/ledger.jsonl."""


def _f(x, signed: bool = False) -> str:
    if x is None:
        return "undefined"
    return f"{x:+.2f}" if signed else f"{x:.2f}"


def entry_line(e: dict) -> str:
    """One ledger entry in words (judge identity, when, against whom, on what, kappas and
    leniency with their intervals, leniency per arm family, self-consistency)."""
    wk, bk, le = e["weighted_kappa"], e["binary_kappa"], e["leniency"]
    text = (f"{e['judge'][:12]} measured {e['measured_at']} against {e['against']} on "
            f"{e['pairs']} pairs ({e['queries']} queries), rubric {e.get('rubric_version')} "
            f"{e['rubric_sha256'][:12]}: weighted kappa {_f(wk['value'])} "
            f"[{_f(wk['low'])}, {_f(wk['high'])}], binary kappa {_f(bk['value'])} "
            f"[{_f(bk['low'])}, {_f(bk['high'])}], leniency {_f(le['mean'], True)} "
            f"[{_f(le['low'], True)}, {_f(le['high'], True)}]")
    fam = e.get("leniency_by_family") or {}
    if fam:
        text += "; by arm family: " + ", ".join(
            f"{name} {_f(v['mean'], True)} [{_f(v['low'], True)}, {_f(v['high'], True)}]"
            for name, v in fam.items())
    sc = e.get("self_consistency")
    if sc:
        text += (f"; self-consistency over {sc.get('samples')} samples: Fleiss kappa "
                 f"{_f(sc.get('fleiss_kappa'))}")
    return text


def state_line(s: dict) -> str:
    """A grader's judge identity now and its calibration's state, with the owed command."""
    if s["judge"] is None:
        return f"judge: {s['grader']} {s['why']}"
    head = f"judge: {s['grader']} identity {s['judge'][:12]}: "
    if s["state"] == "calibrated":
        return head + f"calibrated ({s['why']})"
    return (head + f"{'calibration stale, ' if s['state'] == 'stale' else ''}{s['why']}; "
                   f"owed: a re-check against people, {s['owed']}")


@judge_cmd.command("status")
@params_option
@click.option("--json", "as_json", is_flag=True, help="Print the states as JSON.")
@handle_errors
def status_cmd(params_path, as_json):
    """Print each model grader's judge identity now, whether a calibration against people
    holds for it (none, stale: older than judges.max_age_days or under another rubric, or
    calibrated), and every measurement the ledger keeps for the grader in this experiment.
    A missing or stale calibration is work owed, printed with the command that records it;
    the exit status is 0. A ledger line edited by hand is an Error naming its line."""
    from relgrade.experiment.calibration import judge_states, ledger_path
    from relgrade.experiment.files import Experiment

    ex = Experiment.load(params_path)
    states = judge_states(ex)
    if as_json:
        click.echo(json.dumps(states, indent=2, ensure_ascii=False))
        return
    if not states:
        click.echo("judge: no model grader with a command in this experiment")
        return
    click.echo(f"ledger: {ledger_path(ex).relative_to(ex.working_tree()).as_posix()}")
    for s in states:
        click.echo(state_line(s))
        for e in s["entries"]:
            click.echo("  " + entry_line(e))


@judge_cmd.command("record")
@params_option
@click.option("--grader", "grader", default=None,
              help="The model grader to measure (default: every model grader with a command).")
@click.option("--against", default=None,
              help="The human grader to measure against (default: grading.key_grader or "
                   "grading.auditor, whichever is a human grader).")
@handle_errors
def record_cmd(params_path, grader, against):
    """Measure a model grader's grades made under its judge identity now against people's
    grades of the same pairs (same chunk, same rubric) and append the measurement to the
    repository's judges/ledger.jsonl: weighted and binary kappa with query-resampled
    intervals, the confusion matrix, leniency overall and per arm family, self-consistency,
    the pairs it rests on. The same measurement is not appended twice. Commit the ledger."""
    from relgrade.experiment.calibration import ledger_path, model_judges, record
    from relgrade.experiment.files import Experiment

    ex = Experiment.load(params_path)
    names = [grader] if grader else model_judges(ex)
    if not names:
        click.echo("judge: no model grader with a command in this experiment")
        return
    path = ledger_path(ex).relative_to(ex.working_tree()).as_posix()
    for name in names:
        entry, appended = record(ex, name, against=against)
        verb = "recorded in" if appended else "already in"
        click.echo(f"judge: {name} {verb} {path}: {entry_line(entry)}")
    click.echo(f"Commit {path}.")
