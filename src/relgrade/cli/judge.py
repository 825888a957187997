"""``relgrade judge status`` and ``relgrade judge record``: the calibration ledger.

``judge status`` prints, per model grader of the experiment, its judge identity now and
whether a calibration against people holds for it, then every measurement the ledger keeps
for the grader (any identity)::

    judge: grader-a identity 657d8ca5d666: no calibration recorded; owed: a re-check against people, relgrade judge record --grader grader-a (0 pairs graded by person-b have a grade of this identity; grade some with it first)
      e2ebd2b428ac measured 2026-12-06T05:19:49Z against person-b on 14 pairs (2 queries), rubric v1 4e14c2cf08f2: weighted kappa 0.83 [-0.98, 1.00], binary kappa 0.81 [0.59, 1.00], leniency -0.07 [-0.21, +0.07]

``judge record`` measures a grader's grades under its identity now against people's and
appends the measurement to ``judges/ledger.jsonl`` (see docs/judges.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from relgrade.errors import InputError

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("judge")
def judge_cmd():
    """Model judges: calibration against people (judges/ledger.jsonl) and the robustness
    battery."""


@judge_cmd.command("status")
@params_option
@click.option("--json", "as_json", is_flag=True, help="Print the states as JSON.")
@handle_errors
def status_cmd(params_path, as_json):
    """Print each model grader's judge identity now, whether a calibration against people
    holds for it (none; small: every measurement rests on fewer pairs than
    judges.recheck.min_pairs; stale: older than judges.max_age_days or under another rubric;
    or calibrated), and every measurement the ledger keeps for the grader in this experiment.
    A missing or stale calibration is work owed, printed with the command that records it;
    the exit status is 0. A ledger line edited by hand is an Error naming its line."""
    from relgrade.experiment.calibration import (entry_line, judge_states, ledger_path,
                                                  state_line)
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.cost import people_seconds

    ex = Experiment.load(params_path)
    states = judge_states(ex, seconds_of=people_seconds(ex))
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
@click.option("--identity", default=None,
              help="Measure the grades made under this judge identity (a prefix of it) instead "
                   "of the grader's identity now; needs --grader.")
@handle_errors
def record_cmd(params_path, grader, against, identity):
    """Measure a model grader's grades made under its judge identity now against people's
    grades of the same pairs (same chunk, same rubric) and append the measurement to the
    repository's judges/ledger.jsonl: weighted and binary kappa with query-resampled
    intervals, the confusion matrix, leniency overall and per arm family, self-consistency,
    the pairs it rests on. The same measurement is not appended twice. Commit the ledger."""
    from relgrade.errors import InputError
    from relgrade.experiment.calibration import (entry_line, experiment_name,
                                                 identity_calibration, ledger_path,
                                                 model_judges, record, resolve_identity)
    from relgrade.experiment.files import Experiment
    from relgrade.io.judge_ledger import read_ledger

    ex = Experiment.load(params_path)
    if identity and not grader:
        raise InputError("--identity names one grader's judge identity", item="--identity",
                         fix="add --grader NAME")
    judge = resolve_identity(ex, grader, identity) if identity else None
    names = [grader] if grader else model_judges(ex)
    if not names:
        click.echo("judge: no model grader with a command in this experiment")
        return
    path = ledger_path(ex).relative_to(ex.working_tree()).as_posix()
    entries = read_ledger(ledger_path(ex))  # read once: record() appends what it writes
    for name in names:
        entry, appended = record(ex, name, against=against, judge=judge, entries=entries)
        verb = "recorded in" if appended else "already in"
        click.echo(f"judge: {name} {verb} {path}: {entry_line(entry)}")
        state, why = identity_calibration(ex, name, entry["judge"], entries=entries)
        if state != "calibrated":
            # a measurement too small to hold (or one that does not count for another
            # reason) is kept, but the user must not read "recorded" as "calibrated"
            where = "" if experiment_name(ex) == "." else f" --experiment {experiment_name(ex)}"
            click.echo(f"judge: {name} identity {entry['judge'][:12]} is not calibrated by it: "
                       f"{why}; see relgrade judge status{where} for what is owed")
    click.echo(f"Commit {path}.")


def _render_ppi_pipeline(ex, grader: str, report, *, quiet: bool) -> None:
    """In ppi mode, the key grader's report is a dependency of the ppi stage: render the
    experiment's dvc.yaml again when that adds it (nothing else is rendered here)."""
    from pathlib import Path

    from relgrade.experiment.files import Experiment
    from relgrade.io.files import write_text
    from relgrade.pipeline.registry import render

    p = ex.params
    dvc = Path(ex.root) / "dvc.yaml"
    if p.grading.mode != "ppi" or p.grading.key_grader != grader or not dvc.is_file():
        return
    text = render(Experiment.load(p.source))
    if text == dvc.read_text("utf-8"):
        return
    write_text(dvc, text)
    if not quiet:
        from relgrade.experiment.layout import repro_command

        click.echo(f"rendered {dvc.relative_to(ex.working_tree()).as_posix()}: the ppi stage "
                   f"reads {Path(report).relative_to(ex.working_tree()).as_posix()}; run "
                   f"`{repro_command(ex)}` (at the repository's top), then commit both")


@judge_cmd.command("probe")
@params_option
@click.option("--grader", "grader", default=None,
              help="The model grader to probe (default: grading.key_grader when it is a "
                   "model grader with a command, else the first such grader).")
@click.option("--probe", "probes", multiple=True,
              help="Run only this probe (repeatable): paraphrase, stuff, inject, pad, "
                   "reverse (default: params judges.probe.probes).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def probe_cmd(params_path, grader, probes, as_json):
    """Re-ask a model grader about the audit sample's pairs under the robustness battery:
    seeded paraphrases of the prompt template, query-word stuffing, an injected "perfectly
    relevant" line, padding to twice the length, the batch order reversed. Prints per probe
    the flip rate and the mean signed shift against the pairs' grades of record, with
    intervals resampled by query, and the paraphrase variance components; writes the report
    to judges/probe-GRADER.json in the experiment, the answers under each paraphrase
    included. In ppi mode, for the key grader, the experiment's dvc.yaml is rendered again
    so that the ppi stage depends on the report: the next dvc repro widens the PPI++
    intervals by the paraphrase component (params judges.probe.widen turns that off).
    Probe answers are not grades: nothing reaches the grade files, the bank or the key. A flip rate above
    judges.probe.max_flip_rate is an Error naming the probe (exit 1), after the report."""
    from relgrade.errors import RelgradeError
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.probe import report_lines, report_path, run_probe
    from relgrade.io.files import write_json

    ex = Experiment.load(params_path, resolve=True)
    report = run_probe(ex, grader, probes=list(probes) or None)
    path = report_path(ex, report["grader"])
    write_json(path, report)
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        for line in report_lines(report):
            click.echo(line)
        click.echo(f"written to {path.relative_to(ex.working_tree()).as_posix()}")
    _render_ppi_pipeline(ex, report["grader"], path, quiet=as_json)
    if report["failed"]:
        limit = report["params"]["max_flip_rate"]
        raise RelgradeError("judge probe failed: " + "; ".join(
            f"{p} flip rate {report['probes'][p]['flip_rate']:.3f} above "
            f"judges.probe.max_flip_rate {limit:g}" for p in report["failed"]))


@judge_cmd.command("recheck")
@params_option
@click.option("--grader", "grader", required=True,
              help="The key's model grader whose judge identity now owes a re-check.")
@click.option("--again", is_flag=True,
              help="Draw a re-measurement even though the identity's calibration holds "
                   "(a periodic re-check); without it a calibrated identity owes nothing and "
                   "nothing is drawn.")
@handle_errors
def recheck_cmd(params_path, grader, again):
    """Draw the targeted re-check of GRADER's judge identity now and lock it: a sample of
    its graded pool pairs stratified by the grade the key holds, sized by params
    judges.recheck for the weighted kappa's interval half-width, drawn with a seed derived
    from params seed (recorded in the draw). Drawn once; running it again prints the draw.
    Then the judge grades it (relgrade grade run --grader GRADER --recheck), people grade it
    (relgrade packets export --recheck GRADER, relgrade grade import --recheck GRADER) and
    relgrade judge record writes the stratified measurement to the ledger.

    An identity whose calibration holds (judge status: calibrated, not stale) owes nothing:
    the command says so, draws nothing and exits 0; --again draws a re-measurement anyway."""
    from relgrade.experiment import recheck
    from relgrade.experiment.calibration import identity_calibration, people_grader
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.judges import current_judge
    from relgrade.pipeline.cost import seconds_per_judgment

    ex = Experiment.load(params_path)
    recheck.check_key_judge(ex, grader)
    judge = current_judge(ex, grader)
    state, why = identity_calibration(ex, grader, judge)
    if state == "calibrated" and not again and recheck.read_draw(ex, grader, judge) is None:
        where = recheck.experiment_option(ex)
        click.echo(f"re-check of {grader} identity {judge[:12]}: calibrated ({why}); nothing "
                   f"owed, nothing drawn (a re-measurement anyway: relgrade judge recheck "
                   f"--grader {grader}{where} --again)")
        return
    d, written = recheck.draw(ex, grader, judge)
    against = people_grader(ex, grader)
    o = recheck.owed(ex, grader, judge, against,
                     seconds=seconds_per_judgment(ex.params, against))
    where = "drawn and locked in" if written else "already drawn in"
    # named from the repository's top, as the other files relgrade prints
    drawn = (Path(ex.root).resolve() / o["draw"]).relative_to(
        Path(ex.working_tree()).resolve()).as_posix()
    click.echo(f"re-check of {grader} identity {judge[:12]} {where} {drawn} "
               f"(seed {d['seed']}, planned with {d['planning']}; weighted kappa half-width "
               f"{d['plan']['planned_halfwidth']:.3f} expected)")
    click.echo("owed: " + recheck.owed_words(ex, grader, o))
