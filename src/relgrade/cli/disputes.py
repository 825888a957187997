"""``relgrade disputes``: disputes filed against the rubric, listed by section for review.

A dispute never changes a grade (:mod:`relgrade.protocol.disputes`); a rubric revision
settles it (:mod:`relgrade.protocol.rubric`, docs/disputes.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.group("disputes", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the open disputes as JSON.")
@params_option
@click.pass_context
@handle_errors
def disputes_cmd(ctx, as_json, params_path):
    """List open disputes grouped by rubric section: count, pairs, reasons.

    A dispute is open until a rubric revision's `settles:` line names it. Sections come in
    the current rubric's order; each group lists its disputes (id, pair, grader, the grade
    the grader gives, reason), so they are reviewed together: add a rule with an example,
    or accept the grader's reading and reword the rule. File one on the grading page or
    with `relgrade disputes import FILE`.
    """
    if ctx.invoked_subcommand is not None:
        return
    from relgrade.experiment import revisions
    from relgrade.experiment.files import Experiment
    from relgrade.protocol import disputes as dsp
    from relgrade.text import inert

    ex = Experiment.load(params_path)
    found = revisions.chain(ex)
    settled = {d for _, r, _ in found for d in (r.front.get("settles") or [])}
    groups = dsp.open_by_section(revisions.read_disputes(ex), settled=settled,
                                 sections=found[0][1].sections)
    if as_json:
        click.echo(json.dumps({"rubric_version": ex.params.grading.rubric_version,
                               "open": sum(g["count"] for g in groups), "sections": groups},
                              indent=2, ensure_ascii=False))
        return
    total = sum(g["count"] for g in groups)
    click.echo(f"{total} open dispute{'s' if total != 1 else ''} on rubric "
               f"{ex.params.grading.rubric_version}"
               + (f", {len(groups)} section{'s' if len(groups) != 1 else ''}" if groups else ""))
    for g in groups:
        n = g["count"]
        click.echo(f"§{g['section']} ({inert(g['heading'])}): {n} dispute{'s' if n != 1 else ''}"
                   f", pairs {', '.join(g['pairs'])}")
        for d in g["disputes"]:
            click.echo(f"  {d['id']} {d['query_id']}/{d['chunk_id']} {d['grader']} "
                       f"grade {d['grade']}: {inert(d['reason'])}")


@disputes_cmd.command("import")
@click.argument("file", type=click.Path(path_type=Path))
@params_option
@handle_errors
def import_cmd(file, params_path):
    """File the disputes of FILE (JSON Lines, one dispute a line; see docs/formats.md).

    Each line has the keys query_id, chunk_id, grader, grade, section, reason, in that
    order. Every line is checked first (a pair of the pool, a grader of params, a grade on
    the scale, a section id of the current rubric, a reason of at most 300 characters); one
    bad line refuses the file and nothing is recorded. A dispute recorded before (the same
    fields) is skipped with a note. Grades are never changed.

    The first dispute creates the disputes file (params paths.disputes, added as
    data/disputes.jsonl when the params name none) and renders the experiment's dvc.yaml
    again: its grades and key stages then depend on the file.
    """
    from relgrade.experiment.files import Experiment
    from relgrade.io import files as io
    from relgrade.pipeline import disputes as filing

    io.require_input_file(file, option="FILE")
    ex = Experiment.load(params_path)
    rows = list(io.iter_jsonl(file))
    done = filing.file(ex, [r for _, r in rows], lines=[n for n, _ in rows],
                       source=file.as_posix(), via="import")
    ids, skipped = done.ids, done.skipped
    target = done.path.relative_to(ex.root).as_posix()
    n = len(ids) - skipped
    click.echo(f"Filed {n} dispute{'s' if n != 1 else ''} from {file.as_posix()} in "
               f"{Path(done.path).as_posix()}")
    tree = ex.working_tree().resolve()

    def shown(path) -> str:
        return Path(path).resolve().relative_to(tree).as_posix()

    changed = [shown(done.path)] if n else []
    if done.params_added:
        changed.append(shown(ex.params.source))
        click.echo(f"Added paths.disputes: {target} to {shown(ex.params.source)}")
    if done.rendered is not None:
        changed.append(shown(done.rendered))
        click.echo(f"Rendered {shown(done.rendered)}: the grades and key stages now depend on "
                   f"{shown(done.path)}")
    if skipped:
        click.echo(f"Note: skipped {skipped} dispute{'s' if skipped != 1 else ''} recorded "
                   "before (the same pair, grader, grade, section and reason)")
    if changed:
        click.echo("Commit " + (", ".join(changed[:-1]) + " and " if len(changed) > 1 else "")
                   + changed[-1])


@disputes_cmd.command("sections")
@params_option
@handle_errors
def sections_cmd(params_path):
    """List the current rubric's section ids: the ids a dispute, a grade reason (§id) and a
    revision's `changes:` line name.

    Each line: the id, `general` (applies to every grade: a change makes every grade stale)
    or `case` (applies to the grades that name it), and the heading.
    """
    from relgrade.experiment import revisions
    from relgrade.experiment.files import Experiment
    from relgrade.text import inert

    ex = Experiment.load(params_path)
    for s in revisions.current_sections(ex).values():
        click.echo(f"{s.id}\t{'general' if s.general else 'case'}\t{inert(s.heading)}")
