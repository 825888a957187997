"""``relgrade grade run``: grade a pool with a command grader, in parallel, resumably.

Also the file helpers ``relgrade serve`` and the Label Studio import share: where a grader's
packets, grade file, samples and sidecars live, relative to the params file's folder.
"""

from __future__ import annotations

import signal
import sys
from importlib import resources
from pathlib import Path

import click
import jinja2

from relgrade.cli.render import handle_errors
from relgrade.errors import InputError
from relgrade.experiment.stage import load_params, path_of, section
from relgrade.graders import command as graderun
from relgrade.graders.exchange import code_fence
from relgrade.graders.self_consistency import self_consistency
from relgrade.graders.store import GradeStore
from relgrade.io.files import read_json, read_lines, write_json
from relgrade.protocol import packets as packets_mod
from relgrade.protocol.grades import check_meta

# --- files, relative to the params file's folder -----------------------------------------

def base_dir(params_path) -> Path:
    """The folder the params file's relative paths start from."""
    return Path(params_path).resolve().parent


def load_packets(params: dict, base: Path, role: str) -> dict:
    """One role's packets, query id → packet, sorted by query id.

    Raises
    ------
    InputError
        No packets for the role, or a packet that :func:`relgrade.protocol.packets.check_packet`
        refuses.
    """
    folder = base / path_of(params, "packets") / role
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise InputError(f"no {role} packets found", path=folder, fix="Run: dvc repro packets")
    out = {}
    for f in files:
        p = packets_mod.check_packet(read_json(f), path=f)
        out[str(p["query_id"])] = p
    return dict(sorted(out.items()))


def load_rubric(params: dict, base: Path) -> str:
    """The rubric text (params ``grading.rubric``)."""
    grading = section(params, "grading")
    return "\n".join(read_lines(base / grading["rubric"])) + "\n"


def prompt_template() -> jinja2.Template:
    """The grader prompt template shipped with relgrade (``relgrade/prompts/grader.md``)."""
    text = (resources.files("relgrade") / "prompts" / "grader.md").read_text("utf-8")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["code_fence"] = code_fence
    return env.from_string(text)


def grader_files(params: dict, base: Path, grader: str) -> dict:
    """Paths of a grader's files for the current round (params ``grading.round``).

    Returns
    -------
    dict
        ``grades`` (``round-N.jsonl``), ``meta`` (``round-N.meta.json``), ``samples``
        (``samples/round-N.jsonl``) and ``consistency`` (``round-N.consistency.json``), all
        under ``paths.grades_in/GRADER/``.
    """
    rnd = int(section(params, "grading")["round"])
    folder = base / path_of(params, "grades_in") / grader
    return {"grades": folder / f"round-{rnd}.jsonl",
            "meta": folder / f"round-{rnd}.meta.json",
            "samples": folder / "samples" / f"round-{rnd}.jsonl",
            "consistency": folder / f"round-{rnd}.consistency.json"}


def ensure_meta(path: Path, meta: dict) -> None:
    """Write the grade file's sidecar, or check the one already there against ``meta``.

    Raises
    ------
    InputError
        The sidecar records other intents or another rubric version than the packets.
    """
    if path.exists():
        check_meta(read_json(path), intents_sha256=meta["intents_sha256"],
                   rubric_version=meta["rubric_version"], source=path)
    else:
        write_json(path, meta)


# --- the command ---------------------------------------------------------------------

def _progress_bar(enabled):
    from rich.console import Console
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

    console = Console(stderr=True)
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
    for f in sorted(s.failures, key=lambda f: (f.query_id, f.batch, f.sample)):
        lines.append(f"failed: query {f.query_id} batch {f.batch}"
                     + (f" sample {f.sample}" if f.sample else "") + f": {f.error}")
    if s.interrupted:
        lines.append("interrupted: batches already accepted are recorded; run the same "
                     "command again to resume")
    return lines


@click.command("run")
@click.option("--grader", "grader", required=True, help="The grader (params `graders`) to run.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes at once (default: graders.NAME.workers, else 1).")
@click.option("--params", "params_path", default="params.yaml", show_default=True,
              type=click.Path(dir_okay=False), help="The experiment's params file.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar (default: when stderr is a terminal).")
@handle_errors
def run_cmd(grader, workers, params_path, progress):
    """Grade every pool pair that GRADER has not graded yet, with its command.

    Each batch of at most five chunks goes to a fresh process of graders.NAME.command as a
    JSON request on stdin; the process prints one JSON grade row per chunk (see
    docs/graders.md). Rows are validated on arrival, refused batches are retried, accepted
    batches are appended durably to paths.grades_in/GRADER/round-N.jsonl. Stopping (Ctrl-C)
    or a crash loses at most the batches in flight; run the command again to resume.
    """
    params = load_params(params_path)
    base = base_dir(params_path)
    setup = graderun.grader_setup(section(params, "graders"), grader, path=params_path,
                                  workers=workers)
    grading = section(params, "grading")
    scale = section(params, "scale")["grades"]
    packets = load_packets(params, base, setup.role)
    graderun.check_packets(packets, batch_size=int(grading["batch_size"]),
                           source=str(base / path_of(params, "packets") / setup.role))
    rubric = load_rubric(params, base)
    files = grader_files(params, base, grader)
    ensure_meta(files["meta"], graderun.packet_meta(packets))
    store = GradeStore(files["grades"]).open()
    sample_store = None
    previous = signal.getsignal(signal.SIGTERM)

    def _term(signum, frame):
        raise KeyboardInterrupt

    try:
        if setup.samples > 1:
            sample_store = GradeStore(files["samples"],
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
                max_reason_words=int(grading["max_reason_words"]), template=prompt_template(),
                sample_store=sample_store, progress=lambda n: bar.advance(task, n),
                on_plan=on_plan)
        if setup.samples > 1:
            report = self_consistency(
                graderun.recorded_samples(sample_store.rows, packets=packets, scale=scale,
                                          max_reason_words=int(grading["max_reason_words"]),
                                          kind=setup.kind, role=setup.role,
                                          source=sample_store.path, grader=grader),
                scale=scale, n_samples=setup.samples)
            write_json(files["consistency"], {"grader": grader, "round": int(grading["round"]),
                                              **report})
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
                   f"(written to {files['consistency']})")
    if summary.interrupted:
        sys.exit(130)
    if summary.failures:
        sys.exit(1)

