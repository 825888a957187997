"""``relgrade packets export``: one role's packets as a single file for a grader."""

from __future__ import annotations

import importlib

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors
from relgrade.errors import InputError

#: Export formats: name → "module:function", a function(list of packets) → file bytes,
#: imported when used. Another format (for example a labelling tool's task file) is one more
#: function and one more entry here.
EXPORT_FORMATS = {"jsonl": "relgrade.protocol.packets:packets_jsonl",
                  "label-studio": "relgrade.graders.labelstudio:label_studio_tasks_json"}

#: Whose packets, as relgrade.schema.ROLES lists them (a test checks it); spelled here so
#: that loading the command imports no pandas.
ROLE_NAMES = ("grader", "auditor")


@click.group("packets")
def packets_cmd():
    """Grading packets: what a grader sees for each query, and nothing else."""


@packets_cmd.command("export")
@click.option("--role", default=None, type=click.Choice(ROLE_NAMES),
              help="Whose packets: every query (grader) or the audit sample (auditor).")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="The file to write.")
@click.option("--format", "fmt", default="jsonl", show_default=True,
              type=click.Choice(sorted(EXPORT_FORMATS)),
              help="jsonl: one packet per line; label-studio: a Label Studio task file, one "
                   "task per chunk in display order (import the annotations back with "
                   "`relgrade grade import --format label-studio`).")
@click.option("--grader", default=None,
              help="Whose owed pairs --owed keeps (default: the role's grader, params "
                   "grading.key_grader or grading.auditor); giving it implies --owed.")
@click.option("--owed/--all", "owed", default=None,
              help="--owed: only the pairs the grader still owes (new, stale or audit), what "
                   "it holds a current grade of left out; --all: every pair. Default: --owed "
                   "once the grader has grades recorded this round (a change loop), else "
                   "--all.")
@click.option("--recheck", "recheck", default=None, metavar="GRADER",
              help="Instead of a role's packets: the judge re-check drawn for model grader "
                   "GRADER's identity now, only the pairs people still owe of it.")
@params_option
@handle_errors
def export_cmd(role, out, fmt, grader, owed, recheck, params_path):
    """Write the packets of ROLE (built by `dvc repro packets`) to one file, by query id:
    every pair on a first export, only what the grader still owes once it has grades
    recorded (--owed/--all decide). With --recheck GRADER: the pairs of GRADER's drawn
    judge re-check that people (--grader, default the human grader it is measured against)
    have not graded for it yet, and nothing else."""
    from relgrade.experiment.files import Experiment
    from relgrade.io.files import read_json, write_bytes
    from relgrade.protocol import packets

    ex = Experiment.load(params_path)
    if recheck is not None:
        built, who = _recheck_packets(ex, recheck, grader)
        module, _, name = EXPORT_FORMATS[fmt].partition(":")
        write_bytes(out, getattr(importlib.import_module(module), name)(built))
        pairs = sum(len(batch) for p in built for batch in p["batches"])
        from relgrade.experiment.recheck import experiment_option

        click.echo(f"Wrote {len(built)} re-check packets of {recheck} to {out}: the {pairs} "
                   f"pairs {who} still owes; import the grades with relgrade grade import "
                   f"FILE --grader {who} --recheck {recheck}{experiment_option(ex)}")
        return
    if role is None:
        raise click.UsageError("give --role (or --recheck GRADER)")
    folder = ex.packets_folder(role)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        from relgrade.experiment.layout import repro_command

        raise InputError(f"no {role} packets found", path=folder,
                         fix=f"Run: {repro_command(ex, 'packets')}")
    built = [packets.check_packet(read_json(f), path=f) for f in files]
    built.sort(key=lambda p: p["query_id"])
    if owed is False and grader is not None:
        raise click.UsageError("--grader names whose owed pairs to keep: not with --all")
    who = grader or (ex.params.grading.key_grader if role == "grader"
                     else ex.params.grading.auditor)
    if owed is None:
        owed = grader is not None or (who is not None
                                      and ex.grader_files(who).grades.is_file()
                                      and ex.grader_files(who).grades.stat().st_size > 0)
    if owed:
        if who is None:
            raise InputError("no grader to export the owed pairs of", item="--grader",
                             fix="Pass --grader NAME, or --all")
        built = list(ex.pending_packets(who, {str(p["query_id"]): p for p in built}).values())
    module, _, name = EXPORT_FORMATS[fmt].partition(":")
    write_bytes(out, getattr(importlib.import_module(module), name)(built))
    pairs = sum(len(batch) for p in built for batch in p["batches"])
    what = f"the {pairs} pairs {who} still owes" if owed else "every pair"
    click.echo(f"Wrote {len(built)} {role} packets to {out}: {what}"
               f"{' (--all for every pair)' if owed else ''}")


def _recheck_packets(ex, judge_grader, people):
    """The packets of ``judge_grader``'s drawn re-check that ``people`` still owe, and who."""
    from relgrade.experiment import recheck as rc
    from relgrade.experiment.calibration import people_grader

    _, d = rc.drawn(ex, judge_grader)
    who = people or people_grader(ex, judge_grader)
    return list(rc.recheck_packets(ex, judge_grader, d, owed_by=who).values()), who
