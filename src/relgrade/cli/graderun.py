"""``relgrade grade run``: grade a pool with a command grader, in parallel, resumably.

Where a grader's packets, grade file, samples and sidecars live is the
:class:`~relgrade.experiment.files.Experiment`'s business, relative to the params file's
folder.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from relgrade.cli.options import params_option
from relgrade.cli.render import handle_errors

if TYPE_CHECKING:
    from relgrade.graders import command as graderun

# --- the command ---------------------------------------------------------------------

def _progress_bar(enabled):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task):
            speed = task.finished_speed or task.speed
            return Text("-- pairs/s" if not speed else f"{speed:.1f} pairs/s")

    from relgrade.terminal import console as inert_console

    console = inert_console(stderr=True)
    show = console.is_terminal if enabled is None else enabled
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("pairs"), Rate(), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=console, disable=not show)


def summary_lines(s: graderun.RunSummary, grader: str) -> list[str]:
    """The end-of-run summary, one line per fact."""
    rate = s.graded / s.seconds if s.seconds > 0 else 0.0
    lines = [
        f"{grader}: graded {s.graded} pairs in {s.batches} batches "
        f"({s.seconds:.1f} s, {rate:.1f} pairs/s, {s.commands} processes, "
        f"{s.command_seconds:.1f} s inside them)",
        f"retried {s.retried} attempts; failed {len(s.failures)} batches; "
        f"{s.remaining} of {s.total_pairs} pairs still lack a grade "
        f"({s.already} were recorded before this run)",
    ]
    if s.cache_hits or s.cache_misses:
        lines.append(f"call cache: {s.cache_hits} requests answered from the cache, "
                     f"{s.cache_misses} sent to the command")
    if s.lost:
        lines.append(f"{s.lost} processes lost with their Ray worker were sent again")
    for f in sorted(s.failures, key=lambda f: (f.query_id, f.batch, f.sample)):
        lines.append(f"failed: query {f.query_id} batch {f.batch}"
                     + (f" sample {f.sample}" if f.sample else "") + f": {f.error}")
    if s.capped:
        lines.append(f"cap reached: {s.capped}; the request that would cross it was not sent "
                     f"and every grade recorded so far is kept")
    if s.judge:
        lines.append(f"judge identity {s.judge[:12]} recorded on every bank line of this run")
    if s.interrupted:
        lines.append("interrupted: batches already accepted are recorded; run the same "
                     "command again to resume")
    return lines


def _recheck_work(ex, grader):
    """The packets of the drawn re-check ``grader`` grades and its re-check files
    (:mod:`relgrade.experiment.recheck`): a key judge grades its own identity's re-check; a
    human grader with a command (a simulated person) the people's side of the re-check of
    the key judge measured against it."""
    from relgrade.experiment import recheck as rc

    if ex.params.grader(grader)["kind"] == "human":
        judge_grader = rc.graded_by(ex, grader)
        judge, d = rc.drawn(ex, judge_grader)
        return (rc.recheck_packets(ex, judge_grader, d),
                rc.judge_files(ex, judge_grader, judge, grader))
    judge, d = rc.drawn(ex, grader)
    return rc.recheck_packets(ex, grader, d), rc.judge_files(ex, grader, judge)


@click.command("run")
@click.option("--grader", "grader", required=True, help="The grader (params `graders`) to run.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes at once (default: graders.NAME.workers, else 1).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None,
              help="Where the grader processes run: this machine, or Ray tasks on a cluster "
                   "(default: graders.NAME.executor, else local; ray needs "
                   "pip install 'relgrade[ray]').")
@click.option("--address", default=None,
              help="The Ray cluster for --executor ray (default: graders.NAME.address, else "
                   "RAY_ADDRESS, else a local Ray instance for this run). The ray://HOST:PORT "
                   "form needs Ray Client: pip install 'ray[client]'.")
@click.option("--connect-timeout", "connect_timeout", type=click.FloatRange(min=0, min_open=True),
              default=None,
              help="Seconds to reach the Ray cluster's address before giving up with an error "
                   "(default: graders.NAME.connect_timeout, else 30).")
@click.option("--dry-run", "dry_run", is_flag=True,
              help="Print the requests the run would send, their prompt and output tokens and, "
                   "with a price table (params prices), their cost; start no process.")
@click.option("--max-calls", "max_calls", type=int, default=None,
              help="Start at most N grader processes (N >= 1): the run stops cleanly before "
                   "the request that would cross it.")
@click.option("--recheck", "recheck", is_flag=True,
              help="Grade the judge re-check drawn for the grader's identity now (relgrade "
                   "judge recheck) into its own file, not the round's: the key stays as it is.")
@params_option
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar (default: when stderr is a terminal).")
@handle_errors
def run_cmd(grader, workers, executor, address, connect_timeout, dry_run, max_calls,
            recheck, params_path, progress):
    """Grade every pool pair that GRADER has not graded yet, with its command.

    Each batch of at most five chunks goes to a fresh process of graders.NAME.command as a
    JSON request on stdin; the process prints one JSON grade row per chunk (see
    docs/graders.md). Rows are validated on arrival, refused batches are retried, accepted
    batches are appended durably to paths.grades_in/GRADER/round-N.jsonl. Stopping (Ctrl-C)
    or a crash loses at most the batches in flight; run the command again to resume.
    With paths.call_cache, a request answered before (by any run sharing that file) is
    answered from the cache and starts no process (see docs/grading-at-scale.md).
    --dry-run prices the owed requests without sending any; --max-calls and
    grading.max_cost stop the run before the request that would cross them.
    """
    from relgrade.errors import InputError, ProtocolError
    from relgrade.experiment.chunk_edit import edited_since_build
    from relgrade.experiment.files import Experiment
    from relgrade.experiment.layout import repro_command
    from relgrade.graders import command as graderun
    from relgrade.graders.cache import CallCache
    from relgrade.graders.exchange import prompt_template, prompt_template_text
    from relgrade.experiment.judges import estimate_owed, grader_price
    from relgrade.graders.price import Cap, reason_cap
    from relgrade.graders.self_consistency import self_consistency
    from relgrade.graders.store import GradeStore
    from relgrade.experiment import revisions
    from relgrade.io.files import write_json

    if max_calls is not None and max_calls < 1:
        raise InputError("--max-calls must be an integer >= 1", found=str(max_calls),
                         fix="Give the most grader processes the run may start, or leave "
                             "the option out")
    from relgrade.experiment import recheck as rc

    ex = Experiment.load(params_path, resolve=True)
    spec = ex.params.grader(grader)
    if recheck and spec["kind"] == "human" and spec.get("command") is None:
        judge_grader = rc.graded_by(ex, grader)
        raise InputError(f"{grader} has no command: people grade the re-check of "
                         f"{judge_grader} by hand", path=params_path, item=grader,
                         fix=rc.people_steps(ex, judge_grader, grader, run=False))
    setup = graderun.grader_setup(spec, grader, path=params_path,
                                  workers=workers, executor=executor, address=address,
                                  connect_timeout=connect_timeout, folder=ex.root,
                                  tree=ex.working_tree(), where=rc.experiment_option(ex))
    stale = edited_since_build(ex)
    if stale is not None:
        raise ProtocolError(f"{stale}; nothing was graded. Run `{repro_command(ex)}` first: "
                            "it rebuilds the packets and stops on the pairs owed, then run "
                            "this command again")
    cache_path = ex.call_cache()
    cache = None if cache_path is None else CallCache(cache_path)
    grading = ex.params.grading
    scale = ex.params.need("scale").grades
    max_reason_words = ex.params.need("grading.max_reason_words")
    max_reason_chars = ex.params.grading.max_reason_chars
    packets = ex.grader_packets(grader)
    graderun.check_packets(packets, batch_size=grading.batch_size,
                           source=str(ex.grader_packets_folder(grader)))
    rubric = ex.rubric()
    files = ex.grader_files(grader)
    if recheck:
        packets, files = _recheck_work(ex, grader)
    price = grader_price(ex, grader)
    reason_chars = reason_cap(max_reason_chars, max_reason_words)
    if grading.max_cost is not None and price is None:
        raise InputError(f"grading.max_cost needs a price for grader {grader}",
                         path=params_path, item=grader,
                         fix=f"Add prices.{grader} (or prices.MODEL) with input_per_1k and "
                             "output_per_1k, or remove grading.max_cost")
    if dry_run:
        est = estimate_owed(ex, grader, setup, packets, files, rubric=rubric, scale=scale,
                            max_reason_words=max_reason_words,
                            max_reason_chars=max_reason_chars, price=price,
                            reason_chars=reason_chars)
        for line in ["dry run: no process started, nothing recorded"] + est.lines(grader):
            click.echo(line)
        return
    cap = None if max_calls is None and grading.max_cost is None else Cap(
        max_calls=max_calls, max_cost=grading.max_cost, price=price,
        reason_chars=reason_chars, scale=scale)
    ex.ensure_meta(files, graderun.packet_meta(packets))
    store = GradeStore(files.grades, made_on=ex.made_on(packets),
                       carried=revisions.carried_check(ex)).open()
    sample_store = None
    previous = signal.getsignal(signal.SIGTERM)

    def _term(signum, frame):
        raise KeyboardInterrupt

    try:
        if setup.samples > 1:
            sample_store = GradeStore(files.samples,
                                      key_fields=("query_id", "chunk_id", "sample")).open()
        for st in (store, sample_store):
            if st is not None and st.recovery.truncated_bytes:
                click.echo(f"recovered {st.path}: removed {st.recovery.truncated_bytes} bytes "
                           f"of an {st.recovery.reason}", err=True)
        signal.signal(signal.SIGTERM, _term)
        bar = _progress_bar(progress)
        with bar:
            task = bar.add_task(f"grading {grader}", total=None)

            def on_plan(s):
                bar.update(task, total=s.total_pairs - s.already)

            summary = graderun.run_grader(
                packets, setup=setup, store=store, rubric=rubric, scale=scale,
                max_reason_words=max_reason_words, max_reason_chars=max_reason_chars,
                template=prompt_template(),
                sample_store=sample_store, progress=lambda n: bar.advance(task, n),
                on_plan=on_plan, cache=cache, tree=ex.working_tree(),
                template_text=prompt_template_text(), cap=cap)
        if setup.samples > 1:
            report = self_consistency(
                graderun.recorded_samples(sample_store.rows, packets=packets, scale=scale,
                                          max_reason_words=max_reason_words,
                                          max_reason_chars=max_reason_chars,
                                          kind=setup.kind, role=setup.role,
                                          source=sample_store.path, grader=grader),
                scale=scale, n_samples=setup.samples)
            write_json(files.consistency, {"grader": grader, "round": grading.round, **report})
    finally:
        signal.signal(signal.SIGTERM, previous)
        store.close()
        if sample_store is not None:
            sample_store.close()
    for line in summary_lines(summary, grader):
        click.echo(line)
    if setup.samples > 1:
        k, u = report["fleiss_kappa"], report["unanimous_share"]
        kappa = "undefined" if k is None else f"{k:.3f}"
        unanimous = "undefined" if u is None else f"{u:.1%}"
        click.echo(f"self-consistency over {setup.samples} samples: Fleiss' kappa {kappa}, "
                   f"unanimous {unanimous} of {report['pairs']} pairs "
                   f"(written to {files.consistency})")
    if summary.broken:
        import shlex

        from relgrade.experiment.layout import grade_commands

        rerun = grade_commands(ex)[grader] + "".join(
            f" {flag} {shlex.quote(str(value))}" for flag, value in
            (("--executor", executor), ("--address", address)) if value is not None)
        raise click.ClickException(
            f"{summary.broken}. The {summary.graded} grades recorded in this run are kept; once "
            f"the cluster runs tasks again (ray status), rerun: {rerun}")
    if summary.capped:
        from relgrade.experiment.layout import grade_commands

        click.echo(f"stopped at the cap; to grade the rest, rerun: {grade_commands(ex)[grader]}"
                   + (" (with a new --max-calls N to cap it again)" if max_calls is not None
                      else " (after raising grading.max_cost)"))
    if summary.interrupted:
        sys.exit(130)
    if summary.failures:
        from relgrade.experiment.layout import grade_commands

        # the failures are listed above; the exit is an Error line like every command's
        n = len(summary.failures)
        raise click.ClickException(
            f"{n} batch{'es' if n > 1 else ''} of {grader} failed on every attempt (each "
            f"listed above with its error); the {summary.graded} grades recorded in this run "
            f"are kept. Fix {grader}'s command (graders.{grader}.command in "
            f"{Path(params_path).as_posix()}), then run the same command again to grade what is left: "
            f"{grade_commands(ex)[grader]}")

