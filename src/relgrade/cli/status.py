"""``relgrade status``: where the experiment stands, from whatever files exist."""

from __future__ import annotations

import json

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors


@click.command("status")
@params_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@handle_errors
def status_cmd(params_path, as_json):
    """Say where the experiment stands: frozen inputs, pool, intents, grading, gate, key, metrics.

    For each grader it counts the pool pairs graded in the current round and names, query by
    query, the pairs that still lack a grade (after the pool grew, only those need grading).
    Exits 1, naming the exact fix, when DVC's own files are broken (a truncated dvc.lock,
    an empty .dvc/tmp/rwlock) or the ledger lacks a use of a key that metrics files show.
    """
    from relgrade.experiment.files import Experiment
    from relgrade.pipeline.status import (
        click_status_lines,
        read_status,
        status_failed,
        status_lines,
    )

    ex = Experiment.load(params_path)
    if ex.params.clicks is not None and not ex.params.paths.pool:
        # a click experiment: propensities, IPS estimates and training pairs, no judgments
        lines = click_status_lines(ex)
        click.echo(json.dumps({"clicks": lines}, indent=2) if as_json else "\n".join(lines))
        return
    st = read_status(ex)
    cache_lines = _call_cache(ex, st)
    if as_json:
        click.echo(json.dumps(st, indent=2, ensure_ascii=False))
    else:
        for line in status_lines(st) + cache_lines:
            click.echo(line)
    if status_failed(st):
        raise click.exceptions.Exit(1)


def _call_cache(ex, st) -> list[str]:
    """Per grader of the current round, how its grades were answered (the call cache's hits
    and misses, from the bank); added to ``st`` under ``call_cache``; the lines to print."""
    from relgrade.graders.cache import cache_counts, cache_status_line

    if not ex.params.paths.grades_in:
        return []
    counts = {name: cache_counts(ex.read_bank(files))
              for name, files in ex.grader_round_files().items()}
    counts = {k: v for k, v in counts.items() if v["hit"] + v["miss"]}
    if counts:
        st["call_cache"] = counts
    return [cache_status_line(name, c) for name, c in counts.items()]
