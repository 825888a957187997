"""The ``relgrade`` command line: a thin face over the library.

Each subcommand lives in its own module and is registered here, explicitly, by name in
:data:`COMMANDS`; no module registers a command by being imported. A command's module is
imported only when that command is looked up (to run it or print its help), so
``relgrade --help`` and ``relgrade --version`` import neither pandas nor numpy nor scipy,
and each command module keeps its heavy imports inside the function that runs it. Library
errors become ``Error: ...`` on stderr and exit status 1
(:func:`relgrade.cli.render.handle_errors`); click's usage errors (a missing option, a bad
choice, an unknown option or command) become one ``Error:`` line naming the option, the rule
and ``relgrade COMMAND --help``, exit status 2 (:func:`usage_error`). Everything a command
prints passes through :func:`relgrade.terminal.inert_output` (:meth:`LazyGroup.main`): query
and chunk text,
names, reasons and file names from outside show a bidi or control character as
``\u202e``, never raw.
"""

from __future__ import annotations

import atexit
import errno
import gc
import importlib
from collections.abc import Mapping, Sequence

import click

from relgrade import __version__

#: Every top-level command: the name it is called with -> "module:attribute" of its click
#: command.
COMMANDS = {
    "aggregate": "relgrade.cli.aggregate:aggregate_cmd",
    "agreement": "relgrade.cli.agreement:agreement_cmd",
    "arm": "relgrade.cli.arm:arm_cmd",
    "audit": "relgrade.cli.audit:audit_cmd",
    "budget": "relgrade.cli.budget:budget_cmd",
    "clicks": "relgrade.cli.clicks:clicks_cmd",
    "compare": "relgrade.cli.compare:compare_cmd",
    "corpus": "relgrade.cli.corpus:corpus_cmd",
    "design": "relgrade.cli.design:design_cmd",
    "disputes": "relgrade.cli.disputes:disputes_cmd",
    "drift": "relgrade.cli.drift:drift_cmd",
    "evaluate": "relgrade.cli.evaluate:evaluate_cmd",
    "grade": "relgrade.cli.grade:grade_cmd",
    "init": "relgrade.cli.init:init_cmd",
    "intents": "relgrade.cli.intents:intents_cmd",
    "judge": "relgrade.cli.judge:judge_cmd",
    "metrics": "relgrade.cli.metrics:metrics_cmd",
    "packets": "relgrade.cli.packets:packets_cmd",
    "pipeline": "relgrade.cli.pipeline:pipeline_cmd",
    "pool": "relgrade.cli.pool:pool_cmd",
    "queries": "relgrade.cli.queries:queries_cmd",
    "reconcile": "relgrade.cli.reconcile:reconcile_cmd",
    "serve": "relgrade.cli.serve:serve_cmd",
    "status": "relgrade.cli.status:status_cmd",
}

#: Subcommands added to a command group from another module: group -> {name: "module:attr"}.
SUBCOMMANDS = {"grade": {"run": "relgrade.cli.graderun:run_cmd",
                         "correct": "relgrade.cli.correct:correct_cmd"}}


def _freeze_at_exit() -> None:
    """Collect the command's garbage, then freeze what is left out of the collector.

    Registered with :mod:`atexit` by the ``relgrade`` program's own process
    (:meth:`LazyGroup.__call__`). What is left at exit is mostly the objects of the command's
    imports (pandas, pyarrow, pydantic, relgrade's modules); frozen, the interpreter's
    shutdown no longer walks them in its last collection (about 0.15 CPU-seconds of a
    ``relgrade status``; benchmarks/README.md, "Test suite time"). Nothing is skipped: the
    collection first finalizes every unreachable object of the command's work, as the
    shutdown's collection did, and the frozen objects are still freed by their reference
    counts as the interpreter clears its modules.
    """
    gc.collect()
    gc.freeze()


def _load(spec: str) -> click.Command:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


class _Commands(Mapping):
    """Name -> command, importing a command's module the first time it is asked for."""

    def __init__(self, specs: Mapping[str, str], subcommands: Mapping[str, Mapping[str, str]]):
        self._specs = dict(specs)
        self._subcommands = {k: dict(v) for k, v in subcommands.items()}
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            command = _load(self._specs[name])  # KeyError for an unknown name, as a dict
            for sub, spec in self._subcommands.get(name, {}).items():
                command.add_command(_load(spec), sub)
            self._loaded[name] = command
        return self._loaded[name]

    def __iter__(self):
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


class LazyGroup(click.Group):
    """A click group whose commands are imported on demand from ``"module:attr"`` specs.

    ``commands`` behaves as click's dict of commands (``get``, ``items``, ``in``), but a
    command's module is imported only when that command is looked up, so listing the
    commands in ``--help`` costs one import per command only for the short help it shows.
    """

    def __init__(self, *args, lazy: Mapping[str, str], subcommands=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands = _Commands(lazy, subcommands or {})

    def list_commands(self, ctx):
        return sorted(self.commands)

    def __call__(self, *args, **kwargs):
        # The program's own process (the console script): click's test runner and
        # other callers in a longer-lived process call :meth:`main`, which leaves the
        # collector alone.
        atexit.unregister(_freeze_at_exit)  # once, however often it is called
        atexit.register(_freeze_at_exit)
        return self.main(*args, **kwargs)

    def main(self, *args, **kwargs):
        # Every line a command prints, its Error: line and click's own usage errors pass
        # through one place: stdout and stderr made inert for the run
        # (:func:`relgrade.terminal.inert_output`).
        from relgrade.terminal import inert_output

        with inert_output():
            return super().main(*args, **kwargs)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            raise usage_error(e) from None

    def parse_args(self, ctx, args):
        refuse_undecodable(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            raise usage_error(e) from None
        except (UnicodeError, OSError) as e:
            message = plain_error(e)
            if message is None:
                raise
            raise click.ClickException(message) from None

    def format_commands(self, ctx, formatter):
        # The short help of each command comes from COMMAND_HELP, not from its module, so
        # `relgrade --help` imports no command module.
        rows = [(name, COMMAND_HELP[name]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class UsageLine(click.UsageError):
    """A usage error shown as one ``Error:`` line, without click's usage block and hint;
    the exit status stays click's for usage errors (2)."""

    def show(self, file=None) -> None:
        click.ClickException.show(self, file)


def command_path(ctx: click.Context | None) -> str:
    """``relgrade SUB ...``: the command a usage error belongs to, spelled as the user
    types it whatever name the top group was called by (``ctx`` None: ``relgrade``)."""
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(["relgrade", *reversed(names)])


def usage_error(e: click.UsageError) -> click.UsageError:
    """Click's usage error ``e`` (a missing option or argument, a bad value or choice, an
    unknown option or command, a command's own usage rule) as one line naming the option
    and the rule, and where the command's options are described.

    Parameters
    ----------
    e : click.UsageError

    Returns
    -------
    click.UsageError
        A :class:`UsageLine` (exit status 2) with the text ``"Missing option '--grader': relgrade
        grade run requires it. See relgrade grade run --help"``; ``e`` itself when it is a
        request for the help text (a group called without a command) or already one line.
    """
    from click.exceptions import NoArgsIsHelpError

    if isinstance(e, (UsageLine, NoArgsIsHelpError)):
        return e
    where = command_path(e.ctx)
    text = " ".join(e.format_message().split()).rstrip(".")
    if isinstance(e, click.MissingParameter):
        text += f": {where} requires it"
    elif isinstance(e, click.NoSuchOption):
        text = f"No such option '{e.option_name}': {where} has no such option"
        if e.possibilities:
            text += f" (did you mean {' or '.join(sorted(e.possibilities))}?)"
    stop = "" if text.endswith(("?", "!")) else "."
    out = UsageLine(f"{text}{stop} See {where} --help", ctx=e.ctx)
    out.exit_code = e.exit_code
    return out


def _undecodable_at(text: str) -> int | None:
    """The index of the first character of ``text`` that is no UTF-8 text, or None.

    The command line reaches Python as bytes decoded with ``surrogateescape``: a byte that
    is not UTF-8 becomes a lone surrogate (U+DC80-U+DCFF), which cannot be written anywhere
    as UTF-8 later.
    """
    for i, ch in enumerate(text):
        if "\ud800" <= ch <= "\udfff":
            return i
    return None


def refuse_undecodable(args: Sequence[str]) -> None:
    """Refuse a command line whose option values or arguments are not UTF-8 text.

    Parameters
    ----------
    args : sequence of str
        The command line after ``relgrade`` (as :mod:`click` got it).

    Raises
    ------
    click.ClickException
        ``Error: --reason: not valid UTF-8 ...`` naming the option (``--name value`` or
        ``--name=value``) or the argument's position, before any command runs.
    """
    for i, arg in enumerate(args):
        at = _undecodable_at(arg)
        if at is None:
            continue
        name, value = f"argument {i + 1}", arg
        if arg.startswith("--") and "=" in arg:
            name, _, value = arg.partition("=")
            at = _undecodable_at(value)
        elif i > 0 and args[i - 1].startswith("-") and "=" not in args[i - 1]:
            name = args[i - 1]
        byte = ord(value[at]) - 0xDC00
        found = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else f"\\u{ord(value[at]):04x}"
        raise click.ClickException(
            f"{name}: not valid UTF-8 text (found {found} at character {at + 1}). relgrade's "
            "options and arguments are UTF-8 text: write the value again in a UTF-8 terminal")


#: errno values of a write or read that the user's choice of path explains.
_PATH_ERRORS = {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EACCES,
                errno.EPERM, errno.EROFS, errno.ENAMETOOLONG}


def plain_error(e: BaseException) -> str | None:
    """The one line printed for a decoding or path error no command turned into its own
    message, or None for an error that is not the user's input (raised on as a bug).

    Parameters
    ----------
    e : UnicodeError or OSError

    Returns
    -------
    str or None
        ``"FILE: is a folder, not a file"``-style text for an :class:`OSError` about a path,
        ``"input is not valid UTF-8 text ..."`` for a :class:`UnicodeError`.
    """
    from relgrade.text import inert

    if isinstance(e, UnicodeDecodeError):
        return (f"an input file is not valid UTF-8 text (found byte 0x{e.object[e.start]:02x} "
                f"at byte {e.start + 1}). Save the file as UTF-8")
    if isinstance(e, UnicodeError):
        return (f"text that is not valid Unicode cannot be written ({e.reason}). Write it "
                "again as plain UTF-8 text")
    if isinstance(e, OSError) and e.errno in _PATH_ERRORS and e.filename is not None:
        rule = {errno.EISDIR: "is a folder, where a file is expected",
                errno.ENOTDIR: "a part of this path is a file, where a folder is expected",
                errno.EEXIST: "exists already as a file, where a folder is expected",
                errno.ENOENT: "no such file or folder"}.get(e.errno, e.strerror)
        return f"{inert(str(e.filename))}: {rule}"
    return None


#: The one-line help of each command, shown by ``relgrade --help`` without importing the
#: command's module; each is the start of that command's own help (a test checks it).
COMMAND_HELP = {
    "aggregate": "Aggregate several raters' grades into one grade per pair.",
    "agreement": "Agreement between two grade files A and B over the pairs both graded.",
    "arm": "Add or remove an arm.",
    "audit": "The audit sample: drawn once per round, locked, redrawn only on request.",
    "budget": "The judging-budget curve of a graded experiment.",
    "clicks": "Click logs: position propensities and IPS-weighted skip-above training pairs.",
    "compare": "Paired statistics between arms of the experiment, or between runs on plain "
               "files.",
    "corpus": "The corpus: pin a source archive (spec), write the chunk table (export), or "
              "edit one chunk's text (edit).",
    "design": "Write DESIGN.md from params and, once the key is frozen, its record.",
    "disputes": "List open disputes grouped by rubric section: count, pairs, reasons.",
    "drift": "Compare the experiment's sampled query set with a current query log.",
    "evaluate": "Score each RUN against QRELS: one row per run, one column per measure.",
    "grade": "Record grades for the pool, only ever adding to what is already recorded.",
    "init": "Create an experiment in FOLDER (e.g. experiments/NAME).",
    "intents": "The intent table: one locked line per query, reviewed before any packet "
               "exists.",
    "judge": "Model judges: calibration against people (judges/ledger.jsonl) and the "
             "robustness battery.",
    "metrics": "The experiment's decision metrics (metrics/decision/ARM.json).",
    "packets": "Grading packets: what a grader sees for each query, and nothing else.",
    "pipeline": "The DVC pipeline of each experiment, rendered from the stage registry.",
    "pool": "The pool of the experiment's arms.",
    "queries": "Query sets: sample one from a query log, or refresh a slice of one.",
    "reconcile": "Reconcile the offline verdict with an A/B test's result: the five checks.",
    "serve": "Serve the grading web page.",
    "status": "Say where the experiment stands: frozen inputs, pool, intents, grading, gate, "
              "key, metrics.",
}


@click.group(cls=LazyGroup, lazy=COMMANDS, subcommands=SUBCOMMANDS,
             context_settings={"help_option_names": ["-h", "--help"],
                               # click.echo would delete an escape sequence it finds (off a
                               # terminal) before the inert stream shows it: relgrade prints no
                               # styling through click, so any such sequence is outside text
                               "color": True})
@click.version_option(__version__, prog_name="relgrade")
def main():
    """relgrade: blind pooled relevance grading, audited agreement, a frozen key, metrics."""
